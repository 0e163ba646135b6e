import CoordCore

// The node file's trigger outputs and triggered cameras (CONTRACT §17):
//
//     triggers:
//       - {name: sync, gpio: {chip: /dev/gpiochip0, line: 17}, width_us: 500, active: high}
//     cameras:
//       - {name: mv0, genicam: Basler-acA1920-21234567, trigger: {output: sync, source: Line0, activation: RisingEdge, delay_us: 20}}
extension NodeFile {
    public struct Trigger: Decodable, Equatable, Sendable {
        public struct GPIO: Decodable, Equatable, Sendable {
            public var chip: String
            public var line: Int
            public enum CodingKeys: String, CodingKey, CaseIterable { case chip, line }
        }
        public var name: String
        public var gpio: GPIO
        public var widthMicroseconds: Int64?
        public var active: String?
        public enum CodingKeys: String, CodingKey, CaseIterable {
            case name, gpio, active
            case widthMicroseconds = "width_us"
        }
    }

    /// A camera's `trigger:` entry.
    public struct CameraTriggerEntry: Decodable, Equatable, Sendable {
        public var output: String
        public var source: String?
        public var activation: String?
        public var delayMicroseconds: Int64?
        public enum CodingKeys: String, CodingKey, CaseIterable {
            case output, source, activation
            case delayMicroseconds = "delay_us"
        }
    }

    /// GenICam's TriggerActivation values a pulse train can drive.
    static let activations = ["RisingEdge", "FallingEdge", "LevelHigh", "LevelLow", "AnyEdge"]
    /// A pulse's default width, µs: long enough for every opto-isolated input we know of (Basler, LUCID: 100 µs).
    public static let defaultTriggerWidth: Int64 = 500

    /// The outputs as the core sees them (after `triggerFault` passed).
    public var triggerOutputs: [TriggerOutput] {
        (triggers ?? []).map {
            TriggerOutput(name: $0.name, chip: $0.gpio.chip, line: UInt32($0.gpio.line),
                          widthMicroseconds: $0.widthMicroseconds ?? Self.defaultTriggerWidth,
                          active: $0.active == "low" ? .low : .high)
        }
    }

    /// Each triggered camera's binding, by camera name.
    public var cameraTriggers: [String: CameraTrigger] {
        var out: [String: CameraTrigger] = [:]
        for c in cameras ?? [] {
            guard let t = c.trigger else { continue }
            out[c.name] = CameraTrigger(output: t.output, source: t.source ?? "Line0", activation: t.activation ?? "RisingEdge",
                                        delayMicroseconds: t.delayMicroseconds ?? 0)
        }
        return out
    }

    /// The trigger keys at fault and one sentence, or nil.
    func triggerFault() -> (field: String, sentence: String)? {
        var names = Set<String>()
        var lines = Set<String>()
        for (i, t) in (triggers ?? []).enumerated() {
            let at = "triggers[\(i)]"
            if !RigName.isValid(t.name) { return ("\(at).name", "\(at).name \"\(Echo.short(t.name))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -") }
            if !names.insert(t.name).inserted { return ("\(at).name", "\(at).name \(t.name) is listed twice.") }
            let chip = t.gpio.chip
            let number = chip.hasPrefix("/dev/gpiochip") ? chip.dropFirst("/dev/gpiochip".count) : ""
            if number.isEmpty || !number.allSatisfy(\.isASCII) || Int(number) == nil {
                return ("\(at).gpio.chip", "\(at).gpio.chip must be a GPIO character device such as /dev/gpiochip0 (got \"\(Echo.short(chip))\").")
            }
            if !(0..<1024).contains(t.gpio.line) { return ("\(at).gpio.line", "\(at).gpio.line must be a line offset 0 to 1023 (got \(t.gpio.line)).") }
            if !lines.insert("\(chip):\(t.gpio.line)").inserted {
                return ("\(at).gpio", "\(at) (output \(t.name)) drives line \(t.gpio.line) of \(chip), as an earlier output does.")
            }
            if let w = t.widthMicroseconds, !(1...1_000_000).contains(w) {
                return ("\(at).width_us", "\(at).width_us must be 1 to 1000000 µs (got \(w)).")
            }
            if let a = t.active, a != "high", a != "low" {
                return ("\(at).active", "\(at).active must be high or low (got \"\(Echo.short(a))\").")
            }
        }
        for (i, c) in (cameras ?? []).enumerated() {
            guard let t = c.trigger else { continue }
            let at = "cameras[\(i)].trigger"
            if !names.contains(t.output) {
                let known = names.isEmpty ? "none is declared under triggers" : "declared: \(names.sorted().joined(separator: ", "))"
                return ("\(at).output", "\(at).output \(Echo.short(t.output)) (camera \(c.name)) is not a trigger output of this node (\(known)).")
            }
            if let a = t.activation, !Self.activations.contains(a) {
                return ("\(at).activation", "\(at).activation must be one of \(Self.activations.joined(separator: ", ")) (got \"\(Echo.short(a))\").")
            }
            if let s = t.source, s.isEmpty || !s.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
                return ("\(at).source", "\(at).source must be a trigger input such as Line0 (got \"\(Echo.short(s))\").")
            }
            if let d = t.delayMicroseconds, !(0...1_000_000).contains(d) {
                return ("\(at).delay_us", "\(at).delay_us must be 0 to 1000000 µs (got \(d)).")
            }
            if c.synthetic == true {
                return ("\(at)", "\(at) (camera \(c.name)): a synthetic camera has no trigger input; trigger a GenICam or V4L2 camera.")
            }
        }
        return nil
    }
}
