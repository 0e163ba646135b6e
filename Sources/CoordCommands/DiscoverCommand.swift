import ArgumentParser
import CoordCore
import Coordinator
import Foundation

/// `coord discover` (CONTRACT §7): the nodes that answer on the local network, and a rig file for them.
struct Discover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the coord-node agents on the local network (name, endpoint, cameras, version, public key).",
        discussion: """
        Broadcasts a query on every local IPv4 network (UDP port 5710; --address sends it to given hosts or broadcast \
        addresses instead) and prints every node that answers within --timeout. A node answers only while its control \
        endpoint is one other machines can reach, and says only what a stranger may see. Exits 0 when a node answered, \
        1 when none did. A public key learned this way is only as trustworthy as the network: compare it with the \
        node's own /etc/coord-node/*.key before you rely on it.
        """)

    @Option(help: "Seconds to wait for answers.") var timeout: Double = 3
    @Flag(help: "Print the nodes as JSON.") var json = false
    @Option(help: "Write a rig file for the nodes found (never overwrites a file).") var writeRig: String?
    @Option(help: "With --write-rig: this coordinator's NAME.key_secret, for the rig file's security.cert (nodes with keys).")
    var cert: String?
    @Option(help: "Send the query here instead of every local broadcast address (repeatable).") var address: [String] = []
    @Option(help: "The UDP port nodes answer on.") var port: UInt16 = NodeDiscovery.defaultPort

    func run() async throws {
        bootstrapLogging(false)
        guard timeout.isFinite, timeout > 0, timeout <= 60 else { throw usageError("--timeout must be between 0 and 60 seconds (got \(timeout)).") }
        if let writeRig, FileManager.default.fileExists(atPath: writeRig) {
            throw usageError("\(writeRig) already exists: coord discover never overwrites a rig file; name a new one.")
        }
        let result: NodeDiscovery.Result
        do {
            result = try NodeDiscovery.find(port: port, timeout: timeout, addresses: address)
        } catch {
            throw CoordError(.failure, "coord discover cannot send its query: \(error.description)")
        }
        for sentence in result.ignored { FileHandle.standardError.write(Data("warning: \(sentence)\n".utf8)) }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(result.nodes), as: UTF8.self))
        } else if !result.nodes.isEmpty {
            print(NodeDiscovery.table(result.nodes))
        }
        guard !result.nodes.isEmpty else {
            let targets = result.targets.isEmpty ? "no broadcast-capable network found" : result.targets.joined(separator: ", ")
            throw CoordError(.failure, "no node answered on UDP port \(port) within \(timeout) s (query sent to \(targets)).")
        }
        let conflicts = DiscoveredNode.keyConflicts(result.nodes)
        for sentence in conflicts { FileHandle.standardError.write(Data("warning: \(sentence)\n".utf8)) }
        // A name under two keys was just reported; one under one key at two endpoints is a different mistake.
        let names = Dictionary(grouping: result.nodes, by: \.name)
            .filter { $0.value.count > 1 && Set($0.value.map { $0.publicKey ?? "" }).count == 1 }.keys.sorted()
        if let name = names.first {
            FileHandle.standardError.write(Data("warning: more than one node calls itself \(name); a rig file needs each name once.\n".utf8))
        }
        if let writeRig, !conflicts.isEmpty {
            // Pinning either key could pin an impostor's: the operator compares them with the nodes' own files.
            throw CoordError(.failure, "\(writeRig) was not written: compare the keys above with each node's own /etc/coord-node/*.key and run coord discover again.")
        }
        if let writeRig {
            // The take section says what the cameras offer: the nodes are asked over a handshake, with the keys
            // the file pins (a keyed rig needs this coordinator's pair for that, as for any take).
            let unasked = DiscoveredNode.rigFile(result.nodes, coordinatorCert: cert)
            let offer: (take: TakeOffer?, notAsked: String?)
            do {
                offer = await NodeDiscovery.commonTake(try RigFile.parse(unasked, path: writeRig).spec)
            } catch let error as CoordError {
                offer = (nil, error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message)
            }
            let text = DiscoveredNode.rigFile(result.nodes, coordinatorCert: cert, take: offer.take, notAsked: offer.notAsked)
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: writeRig), options: .withoutOverwriting)
            } catch {
                throw CoordError(.failure, "cannot write \(writeRig): \(error.localizedDescription)")
            }
            FileHandle.standardError.write(Data("wrote \(writeRig) with \(result.nodes.count) node(s)\n".utf8))
            if result.nodes.contains(where: { $0.publicKey != nil }) && cert == nil {
                FileHandle.standardError.write(Data("note: its security.cert names coordinator.key_secret beside it: make it with `coord keys new coordinator` and put coordinator.key in each node's authorized directory.\n".utf8))
            }
        }
    }
}
