import Foundation
import Platform
import Testing

// The GPIO funnel's errors, on this machine without a GPIO chip: every failure is one sentence naming chip and line.
@Suite struct GPIOLineTests {
    func failure(chip: String, line: UInt32) -> String? {
        do {
            let opened = try GPIOLine(chip: chip, line: line, consumer: "coord-test", activeLow: false)
            opened.close()
            return nil
        } catch { return error.description }
    }

    @Test func aMissingChipIsNamed() throws {
        let text = try #require(failure(chip: "/dev/gpiochip97", line: 3))
        #expect(text.contains("/dev/gpiochip97") && text.contains("does not exist") && text.contains("line 3"))
        #expect(text.hasSuffix(".") && !text.contains("\n"))
    }

    @Test func aCharacterDeviceThatIsNotAGPIOChipIsRefused() throws {
        let text = try #require(failure(chip: "/dev/null", line: 0))
        #expect(text == "/dev/null is not a GPIO chip (it does not answer the GPIO chip-info request), so it has no line 0 of /dev/null.")
    }

    @Test func aPlainFileIsNotAGPIOChipEither() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-gpiochip-\(getpid())").path
        FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = try #require(failure(chip: path, line: 5))
        #expect(text.contains("\(path) is not a GPIO chip") && text.contains("line 5"))
    }
}
