#if canImport(Glibc)
import Glibc
#endif
import CGPIO

/// One output the node drives once per group: a real GPIO line (`GPIOLine`), or in tests and coord-node-scripted a
/// scripted line that records what it was told. `set` must be cheap: it is called on the trigger thread at the edge.
public protocol TriggerLine: AnyObject, Sendable {
    /// Drives the line active (true) or inactive (false); polarity is the line's own business.
    func set(_ active: Bool) throws(GPIOFailure)
    /// Releases the line (left inactive).
    func close()
}

/// Why a GPIO line could not be opened or driven: one sentence naming the chip and the line.
public struct GPIOFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A line of a GPIO chip requested as an output through the kernel's GPIO v2 character-device uAPI (the one funnel
/// for CGPIO). The request holds the line until `close`; another process asking for it gets EBUSY.
public final class GPIOLine: TriggerLine, @unchecked Sendable {
    public let chip: String
    public let line: UInt32
    // Written once in init, read by `set`; closed once.
    private var lineFD: Int32

    /// Opens `chip` (a /dev/gpiochipN path) and requests `line` as an output labelled `consumer`, inactive.
    public init(chip: String, line: UInt32, consumer: String, activeLow: Bool) throws(GPIOFailure) {
        self.chip = chip
        self.line = line
        let name = "line \(line) of \(chip)"
        let chipFD = open(chip, O_RDWR | O_CLOEXEC)
        guard chipFD >= 0 else {
            let code = errno
            switch code {
            case ENOENT: throw GPIOFailure("GPIO chip \(chip) does not exist (no such chip), so \(name) cannot be a trigger output.")
            case EACCES, EPERM:
                throw GPIOFailure("GPIO chip \(chip) may not be opened by this user (\(POSIX.text(code))); add the user to the gpio group for \(name).")
            default: throw GPIOFailure("GPIO chip \(chip) could not be opened for \(name): \(POSIX.text(code)) (errno \(code)).")
            }
        }
        defer { _ = Glibc.close(chipFD) }
        let lines = cgpio_chip_lines(chipFD)
        guard lines >= 0 else {
            let code = errno
            if code == ENOTTY || code == EINVAL {
                throw GPIOFailure("\(chip) is not a GPIO chip (it does not answer the GPIO chip-info request), so it has no \(name).")
            }
            throw GPIOFailure("GPIO chip \(chip) did not describe itself for \(name): \(POSIX.text(code)) (errno \(code)).")
        }
        guard line < UInt32(lines) else {
            throw GPIOFailure("GPIO chip \(chip) has no line \(line): it has \(lines) line\(lines == 1 ? "" : "s") (0…\(max(lines - 1, 0))).")
        }
        let fd = cgpio_request_output(chipFD, line, consumer, activeLow ? 1 : 0)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EBUSY:
                var label = [CChar](repeating: 0, count: 32)
                let used = cgpio_line_consumer(chipFD, line, &label)
                let holder = String(decoding: label.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                let who = used == 1 && !holder.isEmpty ? "by another consumer (\"\(holder)\")" : "by another consumer"
                throw GPIOFailure("\(name) is held \(who); free it before using it as a trigger output.")
            case EINVAL: throw GPIOFailure("GPIO chip \(chip) has no usable line \(line) as an output (Invalid argument).")
            default: throw GPIOFailure("\(name) could not be requested as an output: \(POSIX.text(code)) (errno \(code)).")
            }
        }
        lineFD = fd
    }

    public func set(_ active: Bool) throws(GPIOFailure) {
        guard lineFD >= 0 else { throw GPIOFailure("line \(line) of \(chip) was already released.") }
        if cgpio_set(lineFD, active ? 1 : 0) < 0 {
            let code = errno
            throw GPIOFailure("line \(line) of \(chip) could not be set \(active ? "active" : "inactive"): \(POSIX.text(code)) (errno \(code)).")
        }
    }

    public func close() {
        guard lineFD >= 0 else { return }
        _ = cgpio_set(lineFD, 0)
        _ = Glibc.close(lineFD)
        lineFD = -1
    }

    deinit { close() }
}
