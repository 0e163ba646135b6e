/// Which libcamera pipeline handler drives a camera, from the id libcamera gives it (libcamera has no public call
/// naming the handler): a UVC camera's id ends in its USB vendor:product, a Raspberry Pi sensor's is its device-tree
/// path (under `rp1` on a Pi 5, whose pipeline is `rpi/pisp`; `rpi/vc4` before it).
public enum LibcameraPipeline: String, Equatable, Sendable {
    case rpiVC4 = "rpi/vc4"
    case rpiPiSP = "rpi/pisp"
    case uvcvideo
    case other

    public static func of(cameraID id: String) -> LibcameraPipeline {
        let usb = id.split(separator: "-").last.map { tail in
            tail.count == 9 && tail.dropFirst(4).first == ":" && tail.allSatisfy { $0.isHexDigit || $0 == ":" }
        } ?? false
        if usb { return .uvcvideo }
        if id.hasPrefix("/base/") && id.contains("i2c") { return id.contains("rp1") ? .rpiPiSP : .rpiVC4 }
        return .other
    }

    /// What the pipeline's `SensorTimestamp` marks. libcamera defines it as the instant the first row starts to
    /// expose, but the Raspberry Pi pipelines stamp the CSI-2 frame start, when the first row has finished its
    /// exposure and is read out (raspberrypi/picamera2#821); uvcvideo stamps the frame's start as V4L2 does.
    public var timestampMarksEndOfFirstRowExposure: Bool { self == .rpiVC4 || self == .rpiPiSP }

    /// The exposure centre of a frame (µs, the timestamp's clock): the first row's centre, plus half the readout for
    /// a rolling shutter whose readout is known (the middle row's centre; each row starts one line after the last).
    public func center(sensorTimestampMicroseconds t: Double, exposureMicroseconds exposure: Double,
                       readoutMicroseconds readout: Double = 0) -> Double {
        let firstRow = timestampMarksEndOfFirstRowExposure ? t - exposure / 2 : t + exposure / 2
        return firstRow + readout / 2
    }

    /// The stamp a camera of this pipeline is read by (issue 36's choice): the UVC pipeline's `SensorTimestamp` is
    /// uvcvideo's own V4L2 buffer stamp, so uvcvideo's `hwtimestamps` decides it as for a `--v4l2` webcam (nil, as
    /// when uvcvideo is not loaded: Debian's default 0, the first packet's arrival); other pipelines' are taken as
    /// they are (nil).
    public func stampChoice(hwTimestamps: Int?, periodMicroseconds: Double,
                            figures: BufferStampChoice.Figures = .lab) -> BufferStampChoice? {
        guard self == .uvcvideo else { return nil }
        return BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: hwTimestamps ?? 0, monotonic: true, marks: nil,
                                        periodMicroseconds: periodMicroseconds, figures: figures)
    }

    /// The exposure centre by the chosen stamp: uvcvideo's first-packet stamp comes after the exposure ended (the
    /// centre is at least half an exposure before it; the rest of its lateness is stated, not guessed), its
    /// device-clock stamp marks the start. Without a choice, `center(sensorTimestampMicroseconds:…)`.
    public func center(sensorTimestampMicroseconds t: Double, exposureMicroseconds exposure: Double,
                       stamp: BufferStampChoice?) -> Double {
        guard let stamp else { return center(sensorTimestampMicroseconds: t, exposureMicroseconds: exposure) }
        return stamp.marks == .startOfExposure ? t + exposure / 2 : t - exposure / 2
    }
}

/// Whether a camera honours per-request `FrameDurationLimits`, found out at arm by measuring: the camera runs a few
/// frames asked for the nominal duration, then a few asked for a longer one, then nominal again, and the frame
/// intervals its timestamps show are compared with what was asked (never the camera's own claim of it).
public enum FrameDurationProbe {
    public enum Verdict: Equatable, Sendable {
        /// The asked duration shows in the intervals `lagFrames` frames after the frame it was asked after.
        case honoured(lagFrames: Int)
        /// One clause: what the intervals showed.
        case ignored(String)

        /// The law's timing: a request made after frame n sets frame n + lag.
        public var timing: FrameDurationTiming? {
            guard case .honoured(let lag) = self else { return nil }
            return FrameDurationTiming(delayFrames: max(0, lag - 1), lineMicroseconds: 0)
        }
    }

    /// The durations to ask, frame by frame: `lead` nominal, `span` longer by `step`, then nominal to `frames`.
    public static func plan(nominal: Double, step: Double, frames: Int = 36, lead: Int = 6, span: Int = 8) -> [Double] {
        (0..<frames).map { $0 >= lead && $0 < lead + span ? nominal + step : nominal }
    }

    /// `asked[i]` was asked after frame i arrived; `intervals[j]` is frame j+1's timestamp minus frame j's.
    /// Honoured when, at some lag of 1…`maxLag` frames, the intervals of the longer frames average `step` more
    /// than the others, within a quarter of `step`.
    public static func verdict(asked: [Double], intervals: [Double], nominal: Double, step: Double, maxLag: Int = 16) -> Verdict {
        var best: (lag: Int, excess: Double)?
        for lag in 1...max(1, maxLag) {
            var longer: [Double] = [], rest: [Double] = []
            for (i, a) in asked.enumerated() where i + lag < intervals.count {
                if a > nominal + step / 2 { longer.append(intervals[i + lag]) } else { rest.append(intervals[i + lag]) }
            }
            guard !longer.isEmpty, !rest.isEmpty else { continue }
            let excess = longer.reduce(0, +) / Double(longer.count) - rest.reduce(0, +) / Double(rest.count)
            if abs(excess - step) <= step / 4, best.map({ abs(excess - step) < abs($0.excess - step) }) ?? true {
                best = (lag, excess)
            }
        }
        if let best { return .honoured(lagFrames: best.lag) }
        let spread = (intervals.max() ?? 0) - (intervals.min() ?? 0)
        return .ignored("its frame intervals did not follow a requested FrameDurationLimits \(Int(step)) µs longer (they varied by \(Int(spread)) µs in all)")
    }
}

/// The video stream formats a libcamera camera lists, as the node offers them in its handshake.
public enum LibcameraStreamFormats {
    /// The pixel formats the node records from, in the order it prefers them (the funnel's choice at open):
    /// YUV420 as the recorder takes it; packed YUYV, all a UVC webcam offers raw through libcamera's UVC pipeline.
    public static let recordable = ["YUV420", "YUYV"]

    /// The format the node records `listing`'s camera in: the first of `recordable` it lists, nil when none.
    public static func recordedFormat(_ listing: String) -> String? {
        let listed = Set(listing.split(separator: ";").compactMap { $0.split(separator: " ").first.map(String.init) })
        return recordable.first { listed.contains($0) }
    }

    /// The YUV420 sizes in libcamera's listing text ("YUV420 640x480,1280x720; MJPEG 640x480"); a size range
    /// ("YUV420 320x240-1920x1080") offers its two ends.
    public static func yuv420Sizes(_ listing: String) -> [(width: Int, height: Int)] { sizes(of: "YUV420", in: listing) }

    /// The sizes listed for `format`.
    public static func sizes(of format: String, in listing: String) -> [(width: Int, height: Int)] {
        var out: [(Int, Int)] = []
        for entry in listing.split(separator: ";") {
            let words = entry.split(separator: " ", maxSplits: 1).map(String.init)
            guard words.count == 2, words[0] == format else { continue }
            for size in words[1].split(whereSeparator: { $0 == "," || $0 == "-" }) {
                let wh = size.split(separator: "x")
                if wh.count == 2, let w = Int(wh[0]), let h = Int(wh[1]), w > 0, h > 0, !out.contains(where: { $0 == (w, h) }) {
                    out.append((w, h))
                }
            }
        }
        return out
    }

    /// The handshake's formats: every size of the recorded format (recorded as yuv420p either way), at frame
    /// periods within the listed FrameDurationLimits (µs); a camera that lists none (libcamera's UVC pipeline in
    /// 0.0.3) is offered at 30 fps only.
    public static func handshake(_ listing: String, frameDurationLimits: ClosedRange<Int64>?) -> [CameraFormat] {
        let limits = frameDurationLimits ?? 33_333...33_333
        guard let format = recordedFormat(listing) else { return [] }
        return sizes(of: format, in: listing).map {
            CameraFormat(pixelFormat: "yuv420p", width: $0.width, height: $0.height,
                         minFramePeriodMicroseconds: limits.lowerBound, maxFramePeriodMicroseconds: limits.upperBound)
        }
    }
}
