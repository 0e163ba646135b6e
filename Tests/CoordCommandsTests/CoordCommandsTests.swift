// coord's command line without a process: what parses, and how a failure is said (one line, CONTRACT §1's status).
import ArgumentParser
import CoordCore
import Coordinator
import Foundation
import Testing
@testable import CoordCommands

@Suite struct CoordCommandsTests {
    @Test func aReportCommandParses() throws {
        let command = try Coord.parseAsRoot(["report", "/takes/t1", "--json", "--html", "/tmp/page.html"])
        let report = try #require(command as? Report)
        #expect(report.takeDirectory == "/takes/t1" && report.json && report.html == "/tmp/page.html")
    }

    @Test func previewOptionsAreCheckedAsOneUsageSentence() throws {
        var preview = try PreviewOptions.parse(["--preview-width", "0"])
        #expect(try preview.settings() == .off)
        preview = try PreviewOptions.parse(["--preview-width", "63"])
        #expect(throws: CoordError.self) { try preview.settings() }
        do {
            _ = try preview.settings()
        } catch let error as CoordError {
            #expect(error.exitCode == 2 && error.message.hasPrefix("--preview-width/--preview-fps: "))
        }
    }

    @Test(arguments: ["start-take --frobnicate", "no-such-command", "report", "start-take --fps many"])
    func aParserErrorIsOneUsageLinePointingAtHelp(_ line: String) {
        do {
            _ = try Coord.parseAsRoot(line.split(separator: " ").map(String.init))
            Issue.record("\(line) parsed")
        } catch {
            #expect(Coord.exitCode(for: error) == .validationFailure, "\(error)")
            let failure = CommandLineFailure(program: "coord", parserMessage: Coord.message(for: error),
                                             isUsage: Coord.exitCode(for: error) == .validationFailure)
            #expect(failure.status == 2)
            #expect(failure.line.hasPrefix("coord: ") && failure.line.hasSuffix(" (see coord --help)\n"), "\(failure.line)")
            #expect(failure.line.filter { $0 == "\n" }.count == 1, "\(failure.line)")
        }
    }

    @Test func aCommandsOwnFailureKeepsItsStatus() {
        let error = CoordError(.partial, "take t1 is partial: node-1/cam0.mkv is missing.")
        let failure = CommandLineFailure(program: "coord", sentence: error.message, status: error.exitCode)
        #expect(failure == CommandLineFailure(program: "coord", sentence: "take t1 is partial: node-1/cam0.mkv is missing.", status: 4))
        #expect(failure.line == "coord: take t1 is partial: node-1/cam0.mkv is missing.\n")
    }

    @Test func listenMustBeHostAndPort() throws {
        let v4 = try parseListen("127.0.0.1:8080"), v6 = try parseListen("[::1]:80")
        #expect(v4.host == "127.0.0.1" && v4.port == 8080)
        #expect(v6.host == "::1" && v6.port == 80)
        for text in ["8080", "host:port", "h:70000"] {
            do {
                _ = try parseListen(text)
                Issue.record("\(text) parsed")
            } catch let error as CoordError {
                #expect(error.exitCode == 2 && error.message.hasPrefix("--listen must be HOST:PORT"), "\(error.message)")
            } catch {
                Issue.record("\(text): \(error)")
            }
        }
    }

    @Test func reportOnSomethingThatIsNotATakeIsOneUsageSentence() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("coord-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var report = try #require(try Coord.parseAsRoot(["report", dir.path]) as? Report)
        #expect(usageMessage { try report.run() } == "\(dir.path) has no manifest.json; it is not a coord take directory.")
        // Both files there but not a take: the sentence names the key that is missing.
        try Data("{}".utf8).write(to: dir.appendingPathComponent("manifest.json"))
        try Data("{}".utf8).write(to: dir.appendingPathComponent("sync-report.json"))
        report = try #require(try Coord.parseAsRoot(["report", dir.path]) as? Report)
        let message = usageMessage { try report.run() }
        #expect(message?.hasPrefix("\(dir.path)/manifest.json is not readable: ") == true, "\(message ?? "")")
        #expect(message?.hasSuffix(" is missing.") == true, "\(message ?? "")")
    }

    /// The message of the usage error `body` throws; nil (and an issue) for anything else.
    func usageMessage(_ body: () throws -> Void) -> String? {
        do {
            try body()
            Issue.record("no error")
        } catch let error as CoordError {
            #expect(error.exitCode == 2)
            return error.message
        } catch {
            Issue.record("\(error)")
        }
        return nil
    }
}
