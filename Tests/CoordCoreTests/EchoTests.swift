import CoordCore
import Testing

/// What a sentence may repeat of a value from outside (issue 34 item 7): a 10 kB device id cut short, a newline
/// in a name escaped so the sentence stays on one line; and an address as a URL writes it.
@Suite("Echo")
struct EchoTests {
    @Test func aLongValueIsCutToAReadableLength() {
        let id = "/dev/" + String(repeating: "v", count: 10_000)
        let shown = Echo.short(id)
        #expect(shown.count < 130)
        #expect(shown.hasPrefix("/dev/vvv"))
        #expect(shown.hasSuffix("… (10005 bytes)"))
        #expect(Echo.short("hw:1,0") == "hw:1,0")
    }

    @Test func controlCharactersAreEscaped() {
        #expect(Echo.short("cam\nERROR: fake") == #"cam\nERROR: fake"#)
        #expect(Echo.short("a\r\nb\tc") == #"a\r\nb\tc"#)
        #expect(Echo.short("bell\u{7}esc\u{1B}[31m") == #"bell\u{7}esc\u{1B}[31m"#)
        #expect(Echo.short("c1\u{85}del\u{7F}") == #"c1\u{85}del\u{7F}"#)
        #expect(Echo.short("rtl\u{202E}gpj.exe\u{2028}") == #"rtl\u{202E}gpj.exe\u{2028}"#)
        #expect(Echo.short("Kamera wähle ✓") == "Kamera wähle ✓")
        // Cut first, then escaped: a long value with newlines is still one line.
        let long = String(repeating: "line\n", count: 1000)
        #expect(!Echo.short(long).contains("\n"))
        #expect(Echo.short(long).hasSuffix("… (5000 bytes)"))
    }

    @Test func anIPv6AddressIsBracketedInAURL() {
        #expect(HostPort.text(host: "::", port: 9104) == "[::]:9104")
        #expect(HostPort.text(host: "::1", port: 0) == "[::1]:0")
        #expect(HostPort.text(host: "fe80::1%eth0", port: 80) == "[fe80::1%eth0]:80")
        #expect(HostPort.text(host: "127.0.0.1", port: 9104) == "127.0.0.1:9104")
        #expect(HostPort.text(host: "localhost", port: 1) == "localhost:1")
        let parsed = HostPort.parse(HostPort.text(host: "::", port: 9104))
        #expect(parsed?.host == "::" && parsed?.port == 9104)
    }
}
