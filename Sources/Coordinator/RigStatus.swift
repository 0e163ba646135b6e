import CoordCore
import CoordWire
import Foundation
import ZeroMQ

/// `coord status --rig`: what every node of a rig says about itself, asked concurrently (handshake, then one
/// status request), each request bounded by a timeout so an unreachable node costs seconds, not a hang.
public enum RigStatus {
    /// One node's answer, or why there was none.
    public struct NodeReport: Sendable, Equatable {
        /// The name in the rig file.
        public var name: String
        public var endpoint: String
        /// Nil when the node answered; otherwise one sentence saying what failed.
        public var failure: String?
        /// The name the node gave in the handshake.
        public var reportedName: String?
        /// `idle`, `configured`, `armed`, `recording`, `finished`, `failed`.
        public var state: String?
        public var takeID: String?
        /// The node's cameras, in the order it lists them.
        public var cameras: [String]
        /// Things worth the operator's eye on a reachable node (a name mismatch, a missing camera, FAILED detail).
        public var notes: [String]

        public var reachable: Bool { failure == nil }
    }

    /// Asks every node of `spec` at once; results in the rig file's order.
    public static func query(_ spec: RigSpec, timeout: Double = 3) async -> [NodeReport] {
        let context = ZMQContext()
        return await eachNodeResult(spec.nodes) { node -> NodeReport in
            await report(node, keys: spec.linkKeys(for: node), context: context, timeout: timeout)
        }.map { $0.success! }
    }

    static func report(_ node: RigSpec.Node, keys: LinkKeys?, context: ZMQContext, timeout: Double) async -> NodeReport {
        var report = NodeReport(name: node.name, endpoint: node.endpoint, failure: nil, reportedName: nil, state: nil,
                                takeID: nil, cameras: [], notes: [])
        let link: NodeLink
        do {
            link = try NodeLink(endpoint: node.endpoint, name: node.name, context: context, keys: keys)
        } catch {
            report.failure = sentence(error)
            return report
        }
        defer { link.close() }
        do {
            let (reply, _) = try await link.request(CoordRequest.hello(coordinator: ProcessInfo.processInfo.hostName), timeout: timeout, what: "the handshake")
            guard case .helloReply(let wire) = reply.body else {
                throw CoordError(.failure, "node at \(node.endpoint) answered the handshake with something else.")
            }
            let h: Coord_V1_HelloReply
            do throws(FieldFault) { h = try NodeReply.hello(wire, from: "node at \(node.endpoint)") } catch { throw CoordError(error, node: node.name) }
            report.reportedName = h.node
            report.cameras = h.cameras.map(\.name)
            if h.node != node.name { report.notes.append("calls itself \(h.node)") }
            for camera in node.cameraNames ?? [] where !report.cameras.contains(camera) {
                report.notes.append("has no camera \(camera)")
            }
            let (statusReply, _) = try await link.request(CoordRequest.status, timeout: timeout, what: "a status request")
            guard case .status(let wire) = statusReply.body else {
                throw CoordError(.failure, "node at \(node.endpoint) answered a status request with something else.")
            }
            let s: NodeStatus
            do throws(FieldFault) { s = try NodeReply.status(wire, from: "node \(node.name) at \(node.endpoint)") } catch { throw CoordError(error, node: node.name) }
            report.state = s.state.name
            report.takeID = s.takeID.isEmpty ? nil : s.takeID
            if s.state == .failed && !s.detail.isEmpty { report.notes.append(s.detail) }
            for c in s.cameras where !c.error.isEmpty { report.notes.append("\(c.camera): \(c.error)") }
            if let level = s.pressure, level > .nominal {
                report.notes.append("pressure \(level.name): \(s.pressureCause)")
            }
        } catch {
            report.failure = sentence(error)
        }
        return report
    }

    /// The table `coord status` prints: node, endpoint, reachable, state, take, cameras, then notes; an
    /// unreachable node gets one line saying why.
    public static func table(_ reports: [NodeReport]) -> String {
        let header = ["node", "endpoint", "reachable", "state", "take", "cameras"]
        let rows: [[String]] = reports.map { r in
            r.reachable
                ? [r.name, r.endpoint, "yes", r.state ?? "-", r.takeID ?? "-", r.cameras.isEmpty ? "-" : r.cameras.joined(separator: ",")]
                : [r.name, r.endpoint, "no", "-", "-", "-"]
        }
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                i == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ")
        }
        var lines = [line(header)]
        for (r, row) in zip(reports, rows) {
            lines.append(line(row))
            if !r.reachable {
                lines.append("  \(r.name) is unreachable: \(cause(r))")
            }
            for note in r.notes { lines.append("  \(r.name): \(note)") }
        }
        return lines.joined(separator: "\n")
    }

    /// One sentence naming the unreachable nodes, or nil when every node answered.
    public static func problem(_ reports: [NodeReport]) -> String? {
        let down = reports.filter { !$0.reachable }
        guard !down.isEmpty else { return nil }
        let named = down.map { "\($0.name) (\($0.endpoint))" }
        if down.count == 1 { return "node \(down[0].name) at \(down[0].endpoint) is unreachable: \(cause(down[0]))" }
        return "\(down.count) of \(reports.count) nodes are unreachable: \(named.joined(separator: ", "))."
    }

    /// Second Ctrl-C during `start-take`: tell every node to drop the take it holds, so nothing keeps
    /// recording after the coordinator is gone. A node that had started keeps what it captured. Returns the
    /// nodes that could not be told.
    public static func abandon(_ spec: RigSpec, reason: String, timeout: Double = 1) async -> [String] {
        let context = ZMQContext()
        let results = await eachNodeResult(spec.nodes) { node in
            let link = try NodeLink(endpoint: node.endpoint, name: node.name, context: context, keys: spec.linkKeys(for: node))
            defer { link.close() }
            let (reply, _) = try await link.request(CoordRequest.status, timeout: timeout, what: "a status request")
            guard case .status(let s) = reply.body, !s.takeID.isEmpty,
                  [.configured, .armed, .recording].contains(s.state) else { return }
            _ = try await link.request(CoordRequest.abort(takeID: s.takeID, reason: reason), timeout: timeout, what: "the abort")
        }
        return zip(spec.nodes, results).filter { $0.1.failure != nil }.map(\.0.name)
    }

    /// Why a node did not answer, as the rest of a sentence that already named it.
    static func cause(_ report: NodeReport) -> String {
        let failure = report.failure ?? "it answered"
        for prefix in ["node at \(report.endpoint) ", "node \(report.reportedName ?? report.name) at \(report.endpoint) "]
        where failure.hasPrefix(prefix) {
            return "it " + failure.dropFirst(prefix.count)
        }
        return failure
    }

    private static func sentence(_ error: Error) -> String {
        if let e = error as? CoordError { return e.message }
        return "\(error)"
    }
}
