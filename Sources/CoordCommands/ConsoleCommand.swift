import ArgumentParser
import CoordCore
import ConsoleServer
import Coordinator
import Foundation
import Synchronization
import Logging
import Platform
import TakeReport
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Serve the operator's live console for a rig: frame-matched multiview, node status, takes, until Ctrl-C.",
        discussion: """
            Prints CONSOLE http://HOST:PORT/?token=TOKEN once it listens (127.0.0.1:8080 unless --listen says otherwise): \
            open that address; every request needs the token (the page keeps it in a cookie; scripts send \
            Authorization: Bearer TOKEN). Its JSON API is described at /openapi.json.
            """)

    @Option(help: "The rig file (YAML).") var rig: String
    @Option(help: "Where the console listens, HOST:PORT (a port of 0 picks a free one).") var listen: String = "127.0.0.1:8080"
    @OptionGroup var access: ConsoleAccessOptions
    @Option(help: "Directory that receives take directories (default: the rig's take.takes_dir, else ./takes).") var takesDir: String?
    @OptionGroup var preview: PreviewOptions
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        bootstrapLogging(verbose)
        let address = try parseListen(listen)
        let settings = try preview.settings()
        let file = try loadRig(rig)
        let request = try takeRequest(file, name: nil, seconds: 10, takesDir: takesDir, fps: nil, size: nil, codec: nil)
        let consoleSettings = try access.settings(address)
        let prepared = try await preflightConsole(consoleSettings)
        try await serveConsole(spec: file.spec, template: request, settings: consoleSettings, prepared: prepared, preview: settings,
                               rigFile: rig, console: Console())
    }
}

/// The preview tiles the console asks every camera for.
struct PreviewOptions: ParsableArguments {
    @Option(help: "Preview tile width in pixels, even, 64…1920 (0: no preview).") var previewWidth: Int = 480
    @Option(help: "Preview tiles per second per camera, 1…15.") var previewFps: Int = 5

    func settings() throws -> PreviewSettings {
        if previewWidth == 0 { return .off }
        let settings = PreviewSettings(width: previewWidth, fps: previewFps)
        if let problem = settings.problem { throw usageError("--preview-width/--preview-fps: \(problem)") }
        return settings
    }
}

/// HOST:PORT for the console; a usage error naming the flag otherwise.
func parseListen(_ text: String) throws -> (host: String, port: Int) {
    guard let address = HostPort.parse(text) else {
        throw usageError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got \(Echo.short(text))).")
    }
    return address
}

/// Who may use the console (CONTRACT §6b): its token and the host names it answers to.
struct ConsoleAccessOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Keep the console's token in FILE (made 0600 with a new random token if missing), so its address survives a restart; without it every start makes a new token.", valueName: "FILE"))
    var tokenFile: String?
    @Option(help: ArgumentHelp("A host name the console answers to besides its address (repeatable), e.g. the name in the operator's bookmark.", valueName: "NAME"))
    var allowHost: [String] = []
    @Option(help: ArgumentHelp("Seconds a request may take to arrive whole (head, then body) before its connection is closed.", visibility: .hidden))
    var requestTimeout: Double = 10
    @Option(help: ArgumentHelp("Serve HTTPS only, with this PEM certificate (chain); needs --tls-key.", valueName: "FILE"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "FILE"))
    var tlsKey: String?

    func settings(_ address: (host: String, port: Int)) throws -> ConsoleServer.Settings {
        var settings = ConsoleServer.Settings(host: address.host, port: address.port, token: try token())
        for name in allowHost {
            guard !name.isEmpty, name.count <= 253, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-.:[]".contains($0)) }) else {
                throw usageError("--allow-host takes a host name or address, e.g. coord-laptop.local (got \(Echo.short(name))).")
            }
        }
        settings.allowedHosts = allowHost
        guard requestTimeout > 0, requestTimeout <= 3600 else { throw usageError("--request-timeout must be 0 < S ≤ 3600 seconds.") }
        settings.requestTimeout = .nanoseconds(Int64(requestTimeout * 1e9))
        switch (tlsCert, tlsKey) {
        case (let cert?, let key?): settings.tls = (cert, key)
        case (nil, nil): break
        default: throw usageError("--tls-cert and --tls-key go together: give both PEM files, or neither.")
        }
        return settings
    }

    /// The token: from --token-file (made if missing), else a new one.
    func token() throws -> String {
        guard let tokenFile else { return ConsoleGate.newToken() }
        let url = URL(fileURLWithPath: tokenFile)
        if FileManager.default.fileExists(atPath: url.path) {
            guard let data = FileManager.default.contents(atPath: url.path), let text = String(data: data, encoding: .utf8) else {
                throw CoordError(.usage, "--token-file \(tokenFile) cannot be read.")
            }
            let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let problem = ConsoleGate.tokenProblem(token) { throw CoordError(.usage, "--token-file \(tokenFile): \(problem).") }
            if let mode = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
                FileHandle.standardError.write(Data("warning: --token-file \(tokenFile) can be read by other users (mode \(String(mode & 0o777, radix: 8))): chmod 600 it.\n".utf8))
            }
            return token
        }
        let token = ConsoleGate.newToken()
        // O_EXCL with mode 0600: the token is never readable by others, not even for an instant.
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw CoordError(.usage, "--token-file \(tokenFile) cannot be made: \(String(cString: strerror(errno))).") }
        defer { close(fd) }
        let line = Array((token + "\n").utf8)
        guard write(fd, line, line.count) == line.count else {
            throw CoordError(.usage, "--token-file \(tokenFile) cannot be written: \(String(cString: strerror(errno))).")
        }
        return token
    }
}

/// Checks the console can listen, before anything starts; exit 2 with the sentence naming the address otherwise.
func preflightConsole(_ settings: ConsoleServer.Settings) async throws -> ConsoleServer.Prepared {
    do {
        return try await ConsoleServer.preflight(settings)
    } catch {
        throw CoordError(.usage, error.sentence)
    }
}

/// Runs the live console over `spec` until Ctrl-C or SIGTERM (CONTRACT §14): the first signal stops a take that
/// records on one instant, collects it and writes its manifest and report before the console exits; a second one
/// abandons it with `abandon`'s sentence (exit 130). `abandon` defaults to the rig file's: stop the take on every
/// node and leave its files there for `coord collect`.
func serveConsole(spec: RigSpec, template: TakeRequest, settings: ConsoleServer.Settings, prepared: ConsoleServer.Prepared,
                  preview: PreviewSettings, rigFile: String? = nil, console: Console,
                  abandon: (@Sendable (LiveRig.InterruptedTake?) async -> String)? = nil) async throws {
    let logger = Logger(label: "coord.console")
    let live = LiveRig(spec: spec, template: template, preview: preview, rigFile: rigFile, logger: logger)
    if !["127.0.0.1", "localhost", "::1"].contains(settings.host) {
        console.step("warning: the console listens on \(settings.host), beyond this machine: anyone who reaches it with its token can start and stop takes\(settings.tls == nil ? ", and without --tls-cert the token crosses the network in clear text" : "").")
    }
    let interrupts = ConsoleServer.Interrupts(shuttingDown: { waits in
        FileHandle.standardError.write(Data("\ncoord: interrupted; \(waits.map { "\($0) before the console stops (interrupt again to abandon the take)" } ?? "the console stops").\n".utf8))
    }, abandon: abandon ?? { take in await abandonFromRig(take, spec: spec, rigFile: rigFile ?? "RIG.yaml") })
    do {
        try await ConsoleServer.run(rig: live, settings: settings, prepared: prepared, logger: logger, interrupts: interrupts) { listening in
            // One line scripts and tests read (CONTRACT §6b); the operator opens it.
            console.result("CONSOLE \(listening.url)")
            console.step("console: open the CONSOLE address above (Ctrl-C to stop)")
        }
    } catch let failure as ConsoleServer.ListenFailure {
        throw CoordError(.usage, failure.sentence)
    }
    // The take the shutdown finished: said last, and a partial or failed one is the console's exit status.
    guard let take = live.finishedOnClose else { return }
    let directory = take.takeId.map { template.takesDirectory.appendingPathComponent($0).path } ?? template.takesDirectory.path
    switch take.state {
    case .done:
        console.result("take \(take.takeId ?? take.name): complete, stopped and collected as the console stopped\n  \(directory)")
    case .partial:
        console.result("take \(take.takeId ?? take.name): partial\n  \(directory)")
        throw CoordError(.partial, take.message ?? "the take is partial: see its manifest.json.")
    default:
        throw CoordError(.failure, "take \(take.takeId ?? take.name) \(take.state.rawValue) as the console stopped: \(take.message ?? "see its events")")
    }
}

/// A second interrupt on a rig file's console: the take is left to the nodes, stopped on one group where they can be
/// told, and the sentence names what they keep and the commands that finish it.
func abandonFromRig(_ take: LiveRig.InterruptedTake?, spec: RigSpec, rigFile: String) async -> String {
    guard let take else { return "no take was running; the console stops." }
    let id = take.takeID ?? "the take"
    let directory = take.directory?.path ?? id
    if take.collecting {
        return "take \(id) was being collected; every node keeps the files not yet verified here. Finish it with: coord collect --rig \(rigFile) \(directory)"
    }
    guard take.recording else {
        let unreached = await withTimeout(seconds: 3) { await RigStatus.abandon(spec, reason: "the operator abandoned the take") }
        let missed = unreached ?? spec.nodes.map(\.name)
        return missed.isEmpty
            ? "the take is abandoned before it recorded; every node dropped it and keeps whatever it captured in its staging area."
            : "the take is abandoned before it recorded, but \(missed.joined(separator: ", ")) could not be told and may still be recording: run coord stop-take --rig \(rigFile)."
    }
    let stopped = await withTimeout(seconds: 4) { try? await RigStop.stop(spec, lead: 1_000_000, timeout: 1) }
    if let outcome = (stopped ?? nil)?.first(where: { $0.takeID == take.takeID }), outcome.unreached.isEmpty {
        return "take \(id) is abandoned here: every node stops it at group \(outcome.stopGroup) and keeps its files. Finish it with: coord collect --rig \(rigFile) \(directory)"
    }
    return "take \(id) is abandoned here, and some of its nodes could not be told to stop: they may still be recording and keep its files. Finish it with: coord stop-take --rig \(rigFile), then coord collect --rig \(rigFile) \(directory)"
}
