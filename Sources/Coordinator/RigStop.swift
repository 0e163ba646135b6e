import CoordCore
import CoordWire
import Foundation
import Platform
import ZeroMQ

/// `coord stop-take --rig`: stops the take the rig is recording, from any machine. Every node knows the take's
/// frame grid and its own estimate of the rig clock, so one stop group, placed `lead` ahead of the latest
/// node's rig time, is the same instant everywhere. The `start-take` coordinator sees the stop in the nodes'
/// status, relays it to any node this command could not reach, and collects as usual.
public enum RigStop {
    public struct Outcome: Sendable {
        public var takeID: String
        /// The first group not recorded (every camera's last frame is group `stopGroup − 1`).
        public var stopGroup: Int64
        public var secondsAhead: Double
        /// True when the take already stopped at or before this group (nothing was sent).
        public var alreadyStopping: Bool
        /// Nodes of the take that did not acknowledge the stop, each with why.
        public var unreached: [String]
    }

    /// The stop group for a take on `grid` whose nodes' rig clocks read `rigNows`: the first group boundary at
    /// least `lead` µs after the latest of them.
    public static func stopGroup(grid: FrameGrid, rigNows: [Int64], lead: Int64) -> Int64 {
        let latest = rigNows.max() ?? grid.t0
        return max(1, grid.nearestGroup(to: latest + lead) + 1)
    }

    public static func stop(_ spec: RigSpec, lead: Int64 = 2_000_000, timeout: Double = 3) async throws -> [Outcome] {
        let context = ZMQContext()
        let statuses = await eachNodeResult(spec.nodes) { node -> NodeStatus in
            let link = try NodeLink(endpoint: node.endpoint, name: node.name, context: context, keys: spec.linkKeys(for: node))
            link.setName(node.name)
            defer { link.close() }
            let (reply, _) = try await link.request(CoordRequest.status, timeout: timeout, what: "a status request")
            guard case .status(let s) = reply.body else {
                throw CoordError(.failure, "node \(node.name) answered a status request with something else.")
            }
            do throws(FieldFault) { return try NodeReply.status(s, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
        }
        var byTake: [String: [(RigSpec.Node, NodeStatus, FrameGrid)]] = [:]
        for (node, result) in zip(spec.nodes, statuses) {
            guard case .success(let s) = result, s.state == .recording, !s.takeID.isEmpty, let grid = s.grid else { continue }
            byTake[s.takeID, default: []].append((node, s, grid))
        }
        let unreachable = zip(spec.nodes, statuses).compactMap { node, result in result.failure.map { "\(node.name): \($0)" } }
        var outcomes: [Outcome] = []
        for (takeID, members) in byTake.sorted(by: { $0.key < $1.key }) {
            let grid = members[0].2
            let rigNows = members.map(\.1.rigNowMicroseconds)
            let stop = stopGroup(grid: grid, rigNows: rigNows, lead: lead)
            let ahead = Double(grid.instant(ofGroup: stop) - (rigNows.max() ?? grid.t0)) / 1e6
            let current = members.map(\.1.stopGroup).filter { $0 > 0 }
            if current.count == members.count, let earliest = current.min(), earliest <= stop {
                outcomes.append(Outcome(takeID: takeID, stopGroup: earliest, secondsAhead: 0, alreadyStopping: true, unreached: []))
                continue
            }
            let acks = await eachNodeResult(members.map(\.0)) { node in
                let s = CoordRequest.stopAt(takeID: takeID, stopGroup: stop)
                // A fresh connection per try: a lost one may sit in TCP back-off for seconds.
                var lastError: Error?
                for _ in 0..<3 {
                    do {
                        let link = try NodeLink(endpoint: node.endpoint, name: node.name, context: context, keys: spec.linkKeys(for: node))
                        link.setName(node.name)
                        defer { link.close() }
                        _ = try await link.request(s, timeout: Double(lead) / 4e6, what: "the stop")
                        return
                    } catch {
                        lastError = error
                    }
                }
                throw lastError!
            }
            let missed = zip(members, acks).compactMap { member, result in result.failure.map { "\(member.0.name): \($0)" } }
            outcomes.append(Outcome(takeID: takeID, stopGroup: stop, secondsAhead: ahead, alreadyStopping: false,
                                    unreached: missed + unreachable))
        }
        if outcomes.isEmpty, !unreachable.isEmpty {
            throw CoordError(.failure, "no reachable node of the rig is recording, and \(unreachable.count) node(s) did not answer: \(unreachable.joined(separator: "; "))")
        }
        return outcomes
    }
}
