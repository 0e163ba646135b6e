/// What the operator's console shows of takes, in the rig's words (the console maps these onto its OpenAPI types).
public enum LiveView {
    /// A take on the console: starting until group 0, recording, stopping once the operator asks, collecting while
    /// its files come home, then done, partial or failed.
    public enum TakeState: String, Sendable, Equatable, CaseIterable {
        case starting, recording, stopping, collecting, done, partial, failed

        /// Still running: its elapsed time counts and no other take can start.
        public var isRunning: Bool { [.starting, .recording, .stopping, .collecting].contains(self) }
    }

    public struct TakeView: Equatable, Sendable {
        public var takeId: String?
        public var name: String
        public var state: TakeState
        public var seconds: Double?
        public var elapsedS: Double
        public var message: String?
        public var report: String?
        /// While starting with every node armed: seconds until group 0 (nil otherwise).
        public var startsInS: Double?
        public init(takeId: String?, name: String, state: TakeState, seconds: Double?, elapsedS: Double, message: String?, report: String?,
                    startsInS: Double? = nil) {
            self.takeId = takeId; self.name = name; self.state = state; self.seconds = seconds; self.elapsedS = elapsedS
            self.message = message; self.report = report; self.startsInS = startsInS
        }
    }

    /// A request the console cannot carry out, with the HTTP status that says why.
    public struct Refusal: Error, Sendable, Equatable {
        public enum Kind: Sendable, Equatable { case conflict, invalid, notFound, unavailable }
        public var kind: Kind
        public var sentence: String
        public init(_ kind: Kind, _ sentence: String) { self.kind = kind; self.sentence = sentence }
    }
}

/// The console's take as a pure value: a take started from the page, or one the rig's nodes record that no take of
/// this console started (adopted), and the console shutting down. Events come in (an operator's start or stop, a
/// take's phase, the nodes' statuses, the end of a take, shutdown); what to show and what to do come out. The
/// console's shell carries the decisions out: it holds the running session, asks it to stop, runs the collection.
public struct ConsoleTakeState: Sendable {
    public typealias TakeView = LiveView.TakeView
    public typealias Refusal = LiveView.Refusal

    /// The take shown (running, or the last to end).
    public private(set) var take: TakeView?
    /// A take started here runs (from its start until it has ended).
    public private(set) var ownRunning = false
    /// The take the rig's nodes record that this console did not start, and when (monotonic µs) it was last seen.
    public private(set) var adopted: AdoptedTake?
    public private(set) var adoptedSeenAt: Int64 = 0
    /// The adopted take is being stopped and collected from here.
    public private(set) var adoptedStopping = false
    /// The console is shutting down: no take starts any more.
    public private(set) var closing = false
    /// The take that ended while the console shut down, for the line it prints last.
    public private(set) var finishedWhileClosing: TakeView?

    public init() {}

    // MARK: Operator

    /// A take to start from the page: its starting view, or why it cannot start.
    public mutating func start(name: String, seconds: Double?) -> Result<TakeView, Refusal> {
        if closing { return .failure(Refusal(.unavailable, "the console is shutting down; start the take from a console that is running.")) }
        if let adopted, !ownRunning {
            return .failure(Refusal(.conflict, "the rig is recording take \(adopted.takeID) (started elsewhere); stop it from this page or with coord stop-take first."))
        }
        if ownRunning { return .failure(Refusal(.conflict, "a take is already running from this console; stop it first.")) }
        let view = TakeView(takeId: nil, name: name, state: .starting, seconds: seconds, elapsedS: 0, message: nil, report: nil)
        ownRunning = true
        take = view
        return .success(view)
    }

    /// What the operator's Stop does.
    public enum Stop: Equatable, Sendable {
        /// Ask the running session to stop (it answers whether it records yet).
        case own
        /// Place one stop on every node recording this take, then collect it here.
        case adopted(AdoptedTake)
        case refused(Refusal)
    }

    public mutating func stop() -> Stop {
        if ownRunning { return .own }
        guard let adopted else { return .refused(Refusal(.conflict, "no take is recording: there is nothing to stop.")) }
        if closing { return .refused(Refusal(.unavailable, "the console is shutting down; stop the take with coord stop-take --rig RIG.yaml.")) }
        if adoptedStopping {
            return .refused(Refusal(.conflict, "take \(adopted.takeID) is already stopping; it is collected here once every node has stopped."))
        }
        adoptedStopping = true
        return .adopted(adopted)
    }

    /// The session took the stop (true), or does not record yet (false): the view that says so, or the refusal.
    public mutating func ownStop(accepted: Bool) -> Result<TakeView, Refusal> {
        guard let current = take else { return .failure(Refusal(.conflict, "no take is recording: there is nothing to stop.")) }
        guard accepted else {
            return .failure(Refusal(.conflict, "the take is not recording yet (it is \(current.state.rawValue)); stop it once it records."))
        }
        // A take already collecting stays so.
        if current.state == .recording { take?.state = .stopping }
        return .success(take ?? current)
    }

    /// The stop placed on the adopted take's nodes (nil: it could not be placed; the operator may try again).
    public mutating func adoptedStopPlaced(_ placed: Bool) -> TakeView? {
        guard placed else { adoptedStopping = false; return nil }
        if take?.state == .recording { take?.state = .stopping }
        return take
    }

    // MARK: A take started here

    /// The take began recording: the view to show, and whether to stop it at once (the console is shutting down).
    public mutating func recording(takeID: String) -> (view: TakeView?, stopNow: Bool) {
        guard ownRunning, var t = take, t.state == .starting else { return (nil, false) }
        t.state = closing ? .stopping : .recording
        t.takeId = takeID
        take = t
        return (t, closing)
    }

    /// The take's files are being collected.
    public mutating func collecting() -> TakeView? {
        guard var t = take, t.state == .recording || t.state == .stopping else { return nil }
        t.state = .collecting
        take = t
        return t
    }

    /// A take started here, or the collection of an adopted one, ended as `final`.
    public mutating func finished(_ final: TakeView) -> TakeView {
        if !ownRunning, let adopted, final.takeId == adopted.takeID {
            self.adopted = nil
            adoptedStopping = false
        }
        ownRunning = false
        take = final
        if closing { finishedWhileClosing = final }
        return final
    }

    // MARK: A take started elsewhere

    /// The take the nodes' statuses show now (nil: none), seen at `now`: the view to show when it changed, and the
    /// event to say (a take adopted, or one no longer recorded).
    public mutating func seen(_ seen: AdoptedTake?, now: Int64) -> (view: TakeView?, said: String?) {
        // The nodes record this console's own take: nothing is adopted.
        guard !ownRunning else { return (nil, nil) }
        guard let seen else {
            // Stopped and collected from here: the collection says when it ends.
            guard let gone = adopted, !adoptedStopping else { return (nil, nil) }
            adopted = nil
            if take?.takeId == gone.takeID, take?.state.isRunning == true { take = nil }
            return (take, "take \(gone.takeID) is no longer recorded by the rig's nodes (it ended, or was stopped elsewhere)")
        }
        let before = adopted
        adopted = seen
        adoptedSeenAt = now
        guard let before, before.takeID == seen.takeID else {
            // Every take has a stop (an open-ended one 24 h ahead): its length is shown unless it is that.
            let planned = Double(seen.stopGroup) * Double(seen.grid.periodMicroseconds) / 1e6
            adoptedStopping = false
            take = TakeView(takeId: seen.takeID, name: seen.name, state: .recording,
                            seconds: seen.stopGroup > 0 && planned < Self.openEndedSeconds ? planned : nil,
                            elapsedS: seen.recordedSeconds(rigNow: seen.rigNow),
                            message: "started by another coordinator: Stop stops it and collects it here", report: nil)
            return (take, "the rig is recording take \(seen.takeID) on \(seen.nodes.joined(separator: ", ")), started elsewhere: shown here; Stop stops it and collects it")
        }
        // A stop brought forward (from here, `coord stop-take` or its own coordinator): the take is stopping.
        if seen.stopGroup > 0, before.stopGroup == 0 || seen.stopGroup < before.stopGroup, take?.state == .recording {
            take?.state = .stopping
            return (take, nil)
        }
        return (nil, nil)
    }

    /// A stop this far ahead of group 0 is an open-ended take's limit (24 h), not a length anyone chose.
    public static let openEndedSeconds: Double = 86_400 - 60

    /// The adopted take's collection began.
    public mutating func adoptedCollecting(_ view: TakeView) {
        take = view
    }

    /// The take shown at `now`, its elapsed time brought up to date: a take started here from its session's span
    /// (`ownRecorded`, nil before group 0), an adopted one from the nodes' rig clocks moved on since their status.
    /// A take started here whose nodes are armed but whose group 0 (`ownGroupZero`, monotonic µs) is still ahead,
    /// or not placed yet (`ownRecorded` nil), is starting, with the seconds left of the lead: it records from
    /// group 0, not from the arm.
    public func view(now: Int64, ownRecorded: Double?, ownGroupZero: Int64? = nil) -> TakeView? {
        guard var t = take else { return nil }
        guard t.state.isRunning else { return t }
        if !ownRunning, let adopted, t.takeId == adopted.takeID {
            t.elapsedS = adopted.recordedSeconds(rigNow: adopted.rigNow + now - adoptedSeenAt)
        } else if ownRunning {
            t.elapsedS = ownRecorded ?? 0
            if t.state == .recording, ownRecorded == nil || ownGroupZero.map({ now < $0 }) == true {
                t.state = .starting
                t.elapsedS = 0
                t.startsInS = ownGroupZero.map { (Double($0 - now) / 1e5).rounded(.up) / 10 }
            }
        }
        return t
    }

    // MARK: Shutdown

    /// What shutting down waits for.
    public enum Closing: Equatable, Sendable {
        case nothing
        /// Ask the running session to stop; if it does not record yet, it stops as it begins (`recording` says so).
        case stopOwn(name: String)
        /// The adopted take stopping from here is collected first.
        case adoptedStopping(takeID: String, stopGroup: Int64)
    }

    public mutating func close() -> Closing {
        closing = true
        if ownRunning { return .stopOwn(name: take?.takeId ?? take?.name ?? "") }
        if adoptedStopping, let adopted { return .adoptedStopping(takeID: adopted.takeID, stopGroup: adopted.stopGroup) }
        return .nothing
    }
}
