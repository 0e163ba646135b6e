import CoordCore
import Pixels
import V4L2

#if canImport(Glibc)
import Glibc
#endif

/// The format, size and frame interval a V4L2 camera is opened with for a take: pure, so every rule is a unit
/// test. MJPEG is muxed as it arrives when the take records mjpeg; raw YUYV, NV12 or YU12 is converted to
/// yuv420p and encoded with the take's codec.
public struct V4L2FormatChoice: Equatable, Sendable {
    public var fourcc: String
    public var pixelFormat: UInt32
    public var width: Int
    public var height: Int
    public var interval: V4L2FrameInterval
    /// The camera's JPEGs go into the file as they are (no decode, no re-encode).
    public var passthrough: Bool
    /// How a raw format is converted; nil for MJPEG.
    public var layout: RawPixelLayout?

    /// The fourcc of Motion-JPEG (`V4L2_PIX_FMT_MJPEG`); some drivers call it `JPEG`.
    public static let jpegFourccs: Set<String> = ["MJPG", "JPEG"]
    /// A driver's interval counts as the take's period when it is within this fraction of it (500 ppm): a camera
    /// cannot be steered, so a larger rate difference would walk its frames off the grid during the take.
    public static let intervalTolerance = 5e-4

    public init(fourcc: String, pixelFormat: UInt32, width: Int, height: Int, interval: V4L2FrameInterval, passthrough: Bool,
                layout: RawPixelLayout?) {
        self.fourcc = fourcc; self.pixelFormat = pixelFormat; self.width = width; self.height = height
        self.interval = interval; self.passthrough = passthrough; self.layout = layout
    }

    /// The period of `interval` in µs.
    public var periodMicroseconds: Double { interval.periodUs ?? 0 }

    /// The format to open for `width`×`height` at one frame every `periodMicroseconds` recorded with `codec`, or
    /// why none fits, as a sentence naming `device` (no trailing period, so a caller can prefix the camera).
    ///
    /// Preference: MJPEG when the codec is mjpeg (no encoding at all), then the raw formats the hardware delivers
    /// (YUYV, NV12, YU12), then the same converted by libv4l2 (emulated), and MJPEG is never decoded.
    public static func choose(from formats: [V4L2Format], width: Int, height: Int, periodMicroseconds: Double,
                              codec: VideoCodec, device: String) -> Result<V4L2FormatChoice, CameraSourceError> {
        var ranked: [(format: V4L2Format, layout: RawPixelLayout?)] = []
        if codec == .mjpeg {
            ranked += formats.filter { jpegFourccs.contains($0.fourcc) && !$0.isEmulated }.map { ($0, nil) }
        }
        for emulated in [false, true] {
            for layout in RawPixelLayout.allCases {
                ranked += formats.filter { $0.fourcc == layout.rawValue && $0.isEmulated == emulated }.map { ($0, layout) }
            }
        }
        for (format, layout) in ranked {
            guard let size = format.sizes.first(where: { fits($0, in: format, width: width, height: height) }),
                  let interval = interval(in: size, periodMicroseconds: periodMicroseconds) else { continue }
            return .success(V4L2FormatChoice(fourcc: format.fourcc, pixelFormat: format.pixelFormat, width: width, height: height,
                                             interval: interval, passthrough: layout == nil, layout: layout))
        }
        let rate = fpsText(periodMicroseconds)
        let usable = formats.filter { jpegFourccs.contains($0.fourcc) || RawPixelLayout(rawValue: $0.fourcc) != nil }
        let offers = usable.flatMap { format in
            format.sizes.filter { fits($0, in: format, width: width, height: height) }.map { "\(format.fourcc) at \(ratesText($0)) fps" }
        }
        var sentence = "\(Echo.short(device)) cannot deliver \(width)x\(height) at \(rate) fps for \(codec.rawValue)"
        if offers.isEmpty {
            let sizes = Set(usable.flatMap { $0.sizes.map { "\($0.width)x\($0.height)" } }).sorted()
            sentence += sizes.isEmpty ? " (it offers no format coord can record: \(formats.map(\.fourcc).joined(separator: ", ")))"
                : " (it offers no \(width)x\(height) format; its sizes are \(sizes.joined(separator: ", ")))"
        } else {
            sentence += " (at \(width)x\(height) it offers \(offers.joined(separator: "; "))"
            if codec != .mjpeg && offers.contains(where: { $0.hasPrefix("MJPG") || $0.hasPrefix("JPEG") }) {
                sentence += "; its MJPG stream can be recorded only with codec mjpeg, which muxes it as it is"
            }
            sentence += ")"
        }
        return .failure(CameraSourceError(sentence))
    }

    /// Whether `size` of `format` holds exactly `width`×`height` (a stepwise or continuous range: inside it).
    static func fits(_ size: V4L2FrameSize, in format: V4L2Format, width: Int, height: Int) -> Bool {
        switch format.sizeKind {
        case .discrete:
            return Int(size.width) == width && Int(size.height) == height
        case .stepwise, .continuous:
            guard let low = format.sizes.first, let high = format.sizes.last else { return false }
            return (Int(low.width)...Int(max(low.width, high.width))).contains(width)
                && (Int(low.height)...Int(max(low.height, high.height))).contains(height)
        }
    }

    /// The interval of `size` that runs one frame every `periodMicroseconds` (within `intervalTolerance`), or nil.
    static func interval(in size: V4L2FrameSize, periodMicroseconds: Double) -> V4L2FrameInterval? {
        guard periodMicroseconds > 0 else { return nil }
        switch size.intervalKind {
        case .discrete:
            let nearest = size.intervals.filter { $0.periodUs != nil }
                .min { abs($0.periodUs! - periodMicroseconds) < abs($1.periodUs! - periodMicroseconds) }
            guard let nearest, abs(nearest.periodUs! - periodMicroseconds) <= periodMicroseconds * intervalTolerance else { return nil }
            return nearest
        case .stepwise, .continuous:
            let periods = size.intervals.compactMap(\.periodUs)
            guard let shortest = periods.min(), let longest = periods.max(),
                  periodMicroseconds >= shortest * (1 - intervalTolerance), periodMicroseconds <= longest * (1 + intervalTolerance) else { return nil }
            return fraction(periodMicroseconds)
        }
    }

    /// `periodMicroseconds` as a V4L2 fraction of a second: 1/fps when that is exact, 1001/(fps × 1001) at an NTSC
    /// rate (29.97 is 1001/30000, CONTRACT §13), else µs/1 000 000.
    static func fraction(_ periodMicroseconds: Double) -> V4L2FrameInterval {
        let fps = 1_000_000 / periodMicroseconds
        if abs(fps - fps.rounded()) < 1e-6, fps >= 1 { return V4L2FrameInterval(numerator: 1, denominator: UInt32(fps.rounded())) }
        let ntsc = fps * 1.001
        if abs(ntsc - ntsc.rounded()) < 1e-6, ntsc >= 1 { return V4L2FrameInterval(numerator: 1001, denominator: UInt32(ntsc.rounded() * 1000)) }
        return V4L2FrameInterval(numerator: UInt32(periodMicroseconds.rounded()), denominator: 1_000_000)
    }

    /// What a node declares in its handshake for these formats: one entry per recordable format and size, with
    /// the shortest and longest frame period it offers there. MJPEG comes first at each size, because the plan's
    /// budget reads the first format of a size and an mjpeg take then costs no encoding.
    public static func cameraFormats(_ formats: [V4L2Format]) -> [CameraFormat] {
        let order = formats.filter { jpegFourccs.contains($0.fourcc) } + formats.filter { RawPixelLayout(rawValue: $0.fourcc) != nil }
        var result: [CameraFormat] = []
        for format in order where !(format.isEmulated && jpegFourccs.contains(format.fourcc)) {
            for size in format.sizes {
                let periods = size.intervals.compactMap(\.periodUs).filter { $0 > 0 }
                guard let shortest = periods.min(), let longest = periods.max() else { continue }
                let entry = CameraFormat(pixelFormat: format.fourcc, width: Int(size.width), height: Int(size.height),
                                         minFramePeriodMicroseconds: Int64(shortest.rounded(.down)),
                                         maxFramePeriodMicroseconds: Int64(longest.rounded(.up)))
                if !result.contains(entry) { result.append(entry) }
            }
        }
        // The plan reads the first format of a size: every size's MJPEG entry goes ahead of its raw ones.
        var sizes: [[Int]] = []
        for entry in result where !sizes.contains([entry.width, entry.height]) { sizes.append([entry.width, entry.height]) }
        return sizes.flatMap { size -> [CameraFormat] in
            let here = result.filter { [$0.width, $0.height] == size }
            return here.filter { jpegFourccs.contains($0.pixelFormat) } + here.filter { !jpegFourccs.contains($0.pixelFormat) }
        }
    }

    /// "30, 24, 20" for a discrete list; "5–30" for a range.
    public static func ratesText(_ size: V4L2FrameSize) -> String {
        let periods = size.intervals.compactMap(\.periodUs).filter { $0 > 0 }
        switch size.intervalKind {
        case .discrete:
            return periods.map(fpsText).joined(separator: ", ")
        case .stepwise, .continuous:
            guard let shortest = periods.min(), let longest = periods.max() else { return "?" }
            return "\(fpsText(longest))–\(fpsText(shortest))"
        }
    }

    /// "30" or "7.5": frames per second of a period, to at most three decimals.
    public static func fpsText(_ periodMicroseconds: Double) -> String {
        let fps = 1_000_000 / periodMicroseconds
        if abs(fps - fps.rounded()) < 1e-3 { return "\(Int(fps.rounded()))" }
        var text = String(format: "%.3f", fps)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }
}
