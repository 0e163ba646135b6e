// The operator's preview trigger train at a real coord-node process (issue 38): a node with no trigger outputs
// refuses it in one sentence naming itself, on or off, previewing or not (test_snap_triggered runs one that pulses).
import CoordCore
import CoordWire
import Foundation
import Platform
import Testing
import ZeroMQ
@testable import Coordinator

@Suite struct PreviewTrainNodeTests {
    @Test func aNodeWithNoTriggerOutputsRefusesTheTrainNamingItself() async throws {
        let scratch = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let node = try await E2E.offPool {
            try NodeProcess.start(name: "n1", staging: scratch.appendingPathComponent("staging"), log: scratch.appendingPathComponent("n1.log"),
                                  cameras: ["cam0"])
        }
        defer { node.stop() }
        let context = ZMQContext()
        let link = try NodeLink(endpoint: node.endpoint, context: context)
        defer { link.close() }
        for on in [true, false] {
            do {
                _ = try await link.request(CoordRequest.previewTrain(on: on), timeout: 10, what: "the preview train")
                Issue.record("node n1 accepted a preview train \(on ? "on" : "off") with no trigger outputs")
            } catch {
                // The link names the node by its endpoint until a handshake; the node's own sentence names it.
                #expect("\(error)".hasSuffix(" refused the preview train: node n1 has no trigger outputs, so it has no preview train to run."), "\(error)")
            }
        }
    }
}
