import Foundation
import Logging
import NodeAgent
import ServiceLifecycle
import UnixSignals

/// A node built from its configuration: the agent and the services that serve it (the control socket, and
/// `/metrics` when asked for), ready to run; tests build one without a process.
public struct BuiltNode: Sendable {
    public let agent: NodeAgent
    public let services: [ServiceGroupConfiguration.ServiceConfiguration]
    /// The signals that stop the node gracefully: SIGTERM, and SIGINT unless a parent (the demo) owns Ctrl-C.
    public let stopSignals: [UnixSignal]

    /// Runs every service until one ends or a stop signal arrives; the signal is noted first, so a take the node
    /// ends names it in its events.
    public func run(logger: Logger) async throws(NodeStartFailure) {
        let agent = self.agent
        let stopSignals = self.stopSignals
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [], logger: logger))
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    for await signal in await UnixSignalsSequence(trapping: stopSignals) {
                        agent.noteStopping(cause: "\(signal), its service shutting down")
                        await group.triggerGracefulShutdown()
                    }
                }
                // The takes' trigger trains, cancelled once the group (and with it any take's stop) has ended.
                tasks.addTask { await agent.triggerRuns.run() }
                try await group.run()
                tasks.cancelAll()
            }
        } catch {
            throw NodeStartFailure("\(error)", status: 1)
        }
    }
}

/// Builds the node `configuration` describes: its staging directory made, every camera it names opened once (a
/// missing, busy or non-camera device is one sentence naming it, status 1: the flags are right, the machine is
/// not), and its services. `onReady` hears each line a supervisor reads on stdout (READY, METRICS).
public func buildNode(_ configuration: NodeConfiguration, logger: Logger,
                      onReady: @escaping @Sendable (String) -> Void = NodeLogging.printLine) throws(NodeStartFailure) -> BuiltNode {
    do {
        try FileManager.default.createDirectory(at: configuration.staging, withIntermediateDirectories: true)
    } catch {
        throw NodeStartFailure("cannot create staging directory \(configuration.staging.path): \(error.localizedDescription)", status: 1)
    }
    let agent: NodeAgent
    do {
        agent = try NodeAgent(configuration: configuration, logger: logger)
    } catch {
        throw NodeStartFailure(error.message, status: 1)
    }
    // The one line on stdout: tells a supervisor (the demo, a test) where the node listens.
    let server = NodeServer(agent: agent, logger: logger) { bound in onReady("READY \(bound)") }
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
        .init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)]
    if let address = configuration.metrics {
        let metricsLogger = Logger(label: "coord-node.metrics")
        let app = MetricsEndpoint.application(host: address.host, port: address.port,
                                              sample: { agent.metricsSample() }, logger: metricsLogger) { bound in
            metricsLogger.info("serving metrics", metadata: ["url": "http://\(bound)/metrics"])
            // A supervisor (a test, the benchmark) finds a free port here, as it finds READY's endpoint.
            onReady("METRICS http://\(bound)/metrics")
        }
        // A metrics port that cannot be bound is logged and ends the node (a service that ends fails the group).
        services.append(.init(service: app, successTerminationBehavior: .gracefullyShutdownGroup,
                              failureTerminationBehavior: .gracefullyShutdownGroup))
    }
    return BuiltNode(agent: agent, services: services,
                     stopSignals: configuration.parentPID != nil ? [.sigterm] : [.sigterm, .sigint])
}

/// The node's log lines: to the journal when stderr is the journal, else to stderr; each names the node.
public enum NodeLogging {
    /// Bootstraps the process's logging (once per process) and returns the node's logger.
    public static func bootstrap(node: String, level: String?) -> Logger {
        let level = Logger.Level(rawValue: level ?? "info") ?? .info
        let journal = JournalLogHandler.stderrIsTheJournal()
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = journal ? JournalLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            handler[metadataKey: "node"] = "\(node)"
            return handler
        }
        return Logger(label: "coord-node")
    }

    /// One line on stdout, flushed at once (a supervisor waits for it).
    @Sendable public static func printLine(_ line: String) {
        print(line)
        fflush(nil)  // every stream: Swift 6 cannot name the C global stdout
    }
}
