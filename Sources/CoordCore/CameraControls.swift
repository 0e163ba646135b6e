/// A camera's picture controls, as the operator sets them rig-wide (any subset: nil leaves a control as it is).
public struct CameraControls: Equatable, Sendable, Codable {
    public var exposureMicroseconds: Int?
    public var gainDecibels: Double?
    public var whiteBalanceKelvin: Int?
    /// 0 (nearest) … 1 (farthest), mapped onto the camera's own focus range.
    public var focus: Double?

    public init(exposureMicroseconds: Int? = nil, gainDecibels: Double? = nil, whiteBalanceKelvin: Int? = nil, focus: Double? = nil) {
        self.exposureMicroseconds = exposureMicroseconds
        self.gainDecibels = gainDecibels
        self.whiteBalanceKelvin = whiteBalanceKelvin
        self.focus = focus
    }

    enum CodingKeys: String, CodingKey {
        case exposureMicroseconds = "exposure_us", gainDecibels = "gain_db", whiteBalanceKelvin = "white_balance_k", focus
    }

    public var isEmpty: Bool { self == CameraControls() }

    /// `other`'s values where it has them, ours elsewhere.
    public func updated(with other: CameraControls) -> CameraControls {
        CameraControls(exposureMicroseconds: other.exposureMicroseconds ?? exposureMicroseconds,
                       gainDecibels: other.gainDecibels ?? gainDecibels,
                       whiteBalanceKelvin: other.whiteBalanceKelvin ?? whiteBalanceKelvin,
                       focus: other.focus ?? focus)
    }

    /// The API's and the manifest's names for the controls.
    public enum Name: String, CaseIterable, Sendable {
        case exposure = "exposure_us", gain = "gain_db", whiteBalance = "white_balance_k", focus
    }
}

/// What a camera's controls accept; nil: the camera has no such control.
public struct ControlRanges: Equatable, Sendable {
    public var exposureMicroseconds: ClosedRange<Int>?
    public var gainDecibels: ClosedRange<Double>?
    public var whiteBalanceKelvin: ClosedRange<Int>?
    public var focus: ClosedRange<Double>?

    public init(exposureMicroseconds: ClosedRange<Int>? = nil, gainDecibels: ClosedRange<Double>? = nil,
                whiteBalanceKelvin: ClosedRange<Int>? = nil, focus: ClosedRange<Double>? = nil) {
        self.exposureMicroseconds = exposureMicroseconds
        self.gainDecibels = gainDecibels
        self.whiteBalanceKelvin = whiteBalanceKelvin
        self.focus = focus
    }

    public static let none = ControlRanges()

    /// One sentence naming the camera, the control and its range for the first value this camera cannot take
    /// (a control it lacks, a value out of range, a number that is not finite); nil when all fit.
    public func problem(with controls: CameraControls, camera: String) -> String? {
        func check<T: Comparable>(_ value: T?, _ range: ClosedRange<T>?, _ name: CameraControls.Name, _ unit: String) -> String? {
            guard let value else { return nil }
            guard let range else { return "camera \(camera) has no \(name.rawValue) control." }
            guard range.contains(value) else {
                return "camera \(camera): \(name.rawValue) \(value) is outside its range \(range.lowerBound)…\(range.upperBound)\(unit)."
            }
            return nil
        }
        for value in [controls.gainDecibels, controls.focus].compactMap({ $0 }) where !value.isFinite {
            return "camera \(camera): \(value) is not a number a control can take."
        }
        return check(controls.exposureMicroseconds, exposureMicroseconds, .exposure, " µs")
            ?? check(controls.gainDecibels, gainDecibels, .gain, " dB")
            ?? check(controls.whiteBalanceKelvin, whiteBalanceKelvin, .whiteBalance, " K")
            ?? check(controls.focus, focus, .focus, "")
    }
}
