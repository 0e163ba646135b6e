import Platform
import Testing

/// Where `coord discover` sends its query on each interface (issue 27): the interface's broadcast address, or the
/// network's from its netmask when none is set, never the interface's own address.
@Suite struct DiscoveryTargetTests {
    typealias Interface = UDPSocket.IPv4Interface
    let address: UInt32 = 0x0A_2A_07_05  // 10.42.7.5

    @Test func aSetBroadcastAddressIsUsed() {
        let i = Interface(name: "eth0", address: address, netmask: 0xFFFF_FF00, broadcast: 0x0A_2A_07_FF, canBroadcast: true)
        #expect(i.queryTarget.map(Interface.dotted) == "10.42.7.255")
    }

    @Test func withoutABroadcastAddressTheNetmaskGivesIt() {
        // glibc reports the interface's own address as its broadcast when `ip addr add` set none.
        let own = Interface(name: "veth0", address: address, netmask: 0xFFFF_F000, broadcast: address, canBroadcast: true)
        #expect(own.queryTarget.map(Interface.dotted) == "10.42.15.255")
        let none = Interface(name: "veth0", address: address, netmask: 0xFFFF_FF00, broadcast: nil, canBroadcast: true)
        #expect(none.queryTarget.map(Interface.dotted) == "10.42.7.255")
    }

    @Test func networksWithoutABroadcastGetNoQuery() {
        #expect(Interface(name: "lo", address: 0x7F00_0001, netmask: 0xFF00_0000, broadcast: nil, canBroadcast: false).queryTarget == nil)
        #expect(Interface(name: "wg0", address: address, netmask: 0xFFFF_FF00, broadcast: nil, canBroadcast: false).queryTarget == nil,
                "a point-to-point link")
        #expect(Interface(name: "eth1", address: address, netmask: 0xFFFF_FFFF, broadcast: address, canBroadcast: true).queryTarget == nil)
        #expect(Interface(name: "eth1", address: address, netmask: 0xFFFF_FFFE, broadcast: nil, canBroadcast: true).queryTarget == nil)
    }

    @Test func everyTargetOfThisMachineIsABroadcastNotAnOwnAddress() {
        let interfaces = UDPSocket.ipv4Interfaces()
        let own = Set(interfaces.map { Interface.dotted($0.address) })
        for target in UDPSocket.broadcastAddresses() { #expect(!own.contains(target), "\(target) is one of this machine's addresses") }
    }
}
