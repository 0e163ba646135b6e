// Issue 23: what the coordinator says when it cannot write a copy, and where its temporary copies live.
import CoordCore
import Foundation
import Testing
@testable import Coordinator
#if canImport(Glibc)
import Glibc
#endif

@Suite struct CollectorSentenceTests {
    @Test func runningOutOfDescriptorsIsNotCalledAFullDisk() {
        for code in [EMFILE, ENFILE] {
            let said = Collector.fileProblem(code)
            #expect(said.contains("out of file descriptors") && !said.contains("disk"), "\(said)")
        }
        #expect(Collector.fileProblem(ENOSPC).contains("disk is full"))
        #expect(Collector.fileProblem(EROFS).contains("read-only"))
    }

    @Test func aTemporaryCopyLivesWhereNoNodePathCanNameIt() {
        let collector = Collector(directory: URL(fileURLWithPath: "/takes/T"), takeID: "T", policy: CollectPolicy(), console: Console(quiet: true))
        let partial = collector.partialURL("n1/cam0.mkv").path
        #expect(partial == "/takes/T/.coord~partial/n1/.cam0.mkv.part")
        // The folder's name is outside CONTRACT §4's names, so no `<node>/<file>` a node lists can reach it.
        #expect(!RigName.isValid(Collector.partialFolder))
        #expect(collector.finalURL("n1/.cam0.mkv.part").path != partial)
    }
}
