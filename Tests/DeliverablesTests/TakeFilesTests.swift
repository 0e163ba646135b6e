import Foundation
import Platform
import Synchronization
import Testing
@testable import Deliverables
#if canImport(Glibc)
import Glibc
#endif

/// The take-directory funnel (CONTRACT §14) on real files: links, FIFOs and devices refused with a sentence naming
/// the path, nothing read or written through a link, nothing blocking.
@Suite struct TakeFilesTests {
    /// A fresh take-like folder with `a/cam0.mkv` and `manifest.json`, and a folder outside it holding a secret.
    static func fixture() throws -> (root: String, outside: String) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("takefiles-\(UUID().uuidString)").path
        let root = base + "/take", outside = base + "/outside"
        try FileManager.default.createDirectory(atPath: root + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("pictures".utf8).write(to: URL(fileURLWithPath: root + "/a/cam0.mkv"))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: root + "/manifest.json"))
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside + "/secret"))
        return (root, outside)
    }

    static func reason(_ body: () throws -> Void) -> TakeFileError? {
        do { try body() } catch let e as TakeFileError { return e } catch { return nil }
        return nil
    }

    /// Two nodes' copies start together and each makes `.coord~partial/<node>`: a folder another thread makes between
    /// this thread's open and its look is opened, never "cannot create … No such file or directory" (a collect failed so).
    @Test func foldersMadeByOtherThreadsAtTheSameInstantAreOpened() throws {
        let (root, _) = try Self.fixture()
        let failures = Mutex<[String]>([])
        for round in 0..<300 {
            DispatchQueue.concurrentPerform(iterations: 6) { node in
                do { _ = try TakeDirectory.open(root).directory("p\(round)/.coord~partial/node-\(node)", create: true) }
                catch { failures.withLock { $0.append("\(error)") } }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
    }

    @Test func aRegularFileIsReadAndItsSizeKnown() throws {
        let (root, _) = try Self.fixture()
        let take = try TakeDirectory.open(root)
        let file = try take.file("a/cam0.mkv")
        #expect(file.size == 8)
        #expect(try file.data() == Data("pictures".utf8))
        #expect(try take.checkFile("manifest.json"))
        #expect(try take.checkFile("a/none.mkv") == false)
        #expect(try take.entry("none/cam0.mkv") == nil)
        // Through the descriptor's own name, the file a path-only library opens is this one.
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.procPath)) == Data("pictures".utf8))
    }

    @Test func aLinkedFileIsRefusedWithASentenceNamingIt() throws {
        let (root, outside) = try Self.fixture()
        #expect(symlink(outside + "/secret", root + "/a/cam1.mkv") == 0)
        let take = try TakeDirectory.open(root)
        let error = Self.reason { _ = try take.file("a/cam1.mkv") }
        #expect(error?.reason == .symbolicLink)
        #expect(error?.sentence.hasPrefix("\(root)/a/cam1.mkv is a symbolic link") == true)
        #expect(error?.sentence.contains("secret") == false || error?.sentence.contains(outside) == false)
        #expect(Self.reason { try take.checkFile("a/cam1.mkv") }?.reason == .symbolicLink)
        #expect(Self.reason { _ = try take.regularFiles() }?.reason == .symbolicLink)
    }

    @Test func aLinkedFolderInTheMiddleIsRefusedForReadingAndWriting() throws {
        let (root, outside) = try Self.fixture()
        #expect(symlink(outside, root + "/b") == 0)
        let take = try TakeDirectory.open(root)
        #expect(Self.reason { _ = try take.file("b/secret") }?.reason == .symbolicLink)
        #expect(Self.reason { _ = try take.entry("b/secret") }?.reason == .symbolicLink)
        #expect(Self.reason { _ = try take.directory("b", create: true) }?.reason == .symbolicLink)
        #expect(Self.reason { try take.writeAtomically(Data("x".utf8), to: "b/written") }?.reason == .symbolicLink)
        #expect(Self.reason { _ = try take.create("b/c/new") }?.reason == .symbolicLink)
        #expect(!FileManager.default.fileExists(atPath: outside + "/written"))
        #expect(!FileManager.default.fileExists(atPath: outside + "/c"))
        #expect(try String(contentsOfFile: outside + "/secret", encoding: .utf8) == "secret")
    }

    @Test func aLinkAtAWrittenNameIsReplacedNotWrittenThrough() throws {
        let (root, outside) = try Self.fixture()
        #expect(symlink(outside + "/secret", root + "/report.json") == 0)
        let take = try TakeDirectory.open(root)
        try take.writeAtomically(Data("new".utf8), to: "report.json")
        #expect(try String(contentsOfFile: outside + "/secret", encoding: .utf8) == "secret")
        #expect(try take.data("report.json") == Data("new".utf8))
        // A new file is never made over a link (O_EXCL with O_NOFOLLOW).
        #expect(symlink(outside + "/made", root + "/a/link") == 0)
        #expect(Self.reason { _ = try take.create("a/link") }?.reason == .symbolicLink)
        #expect(!FileManager.default.fileExists(atPath: outside + "/made"))
    }

    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        let (root, _) = try Self.fixture()
        #expect(mkfifo(root + "/a/cam2.mkv", 0o644) == 0)
        let take = try TakeDirectory.open(root)
        let started = Date()
        let error = Self.reason { _ = try take.file("a/cam2.mkv") }
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(error?.reason == .fifo)
        #expect(error?.sentence.contains("FIFO") == true)
        #expect(Self.reason { _ = try take.regularFiles() }?.reason == .fifo)
    }

    @Test func aDeviceBehindALinkIsRefusedAsALinkAndADeviceAsADevice() throws {
        let (root, _) = try Self.fixture()
        #expect(symlink("/dev/null", root + "/a/null.mkv") == 0)
        let take = try TakeDirectory.open(root)
        #expect(Self.reason { _ = try take.file("a/null.mkv") }?.reason == .symbolicLink)
        // /dev itself as the "take": a character device by its own name is refused as one.
        let dev = try TakeDirectory.open("/dev")
        let error = Self.reason { _ = try dev.file("null") }
        #expect(error?.reason == .characterDevice)
        #expect(error?.sentence == "/dev/null is a character device, not a regular file; coord opens nothing in a take directory but its regular files and folders, and never follows a link.")
    }

    @Test func pathsLeadingOutAreRefusedAndAFileIsNotAFolder() throws {
        let (root, _) = try Self.fixture()
        let take = try TakeDirectory.open(root)
        for path in ["../outside/secret", "/etc/passwd", "a/../manifest.json", "a//cam0.mkv", ""] {
            #expect(Self.reason { _ = try take.file(path) }?.reason == .outside, "\(path)")
        }
        #expect(Self.reason { _ = try take.file("a") }?.reason == .directory)
        #expect(Self.reason { _ = try take.directory("manifest.json") }?.reason == .notDirectory)
        #expect(Self.reason { _ = try TakeDirectory.open(root + "/manifest.json") }?.reason == .notDirectory)
        #expect(Self.reason { _ = try take.file("a/none") }?.reason == .missing)
    }

    @Test func theWalkListsRegularFilesAndSkipsWhatItIsTold() throws {
        let (root, outside) = try Self.fixture()
        #expect(symlink(outside, root + "/ascmhl") == 0)
        let take = try TakeDirectory.open(root)
        let files = try take.regularFiles { $0 == "ascmhl" }
        #expect(Set(files.keys) == ["a/cam0.mkv", "manifest.json"])
        #expect(files["a/cam0.mkv"]?.size == 8)
    }

    @Test func aFramesTableThatIsNotOneQuotesAShortEscapedPieceNeverTheFile() throws {
        let passwd = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        let problem = try #require(DeliverPlan.framesProblem("frame,group,center_us,flags\n" + passwd, groups: 1, file: "n/c.frames.csv"))
        #expect(problem.sentence == "n/c.frames.csv has a row that is not frame,group,…: \"root:x:0:0:root:/root:/b…\".")
        #expect(!problem.sentence.contains("daemon"))
        let escape = try #require(DeliverPlan.framesProblem("h\n\u{1B}[2J\tx\"\n", groups: 1, file: "f"))
        #expect(escape.sentence == "f has a row that is not frame,group,…: \"\\u{1B}[2J\\tx\\\"\".")
        #expect(!escape.sentence.unicodeScalars.contains { $0.properties.generalCategory == .control })
    }
}
