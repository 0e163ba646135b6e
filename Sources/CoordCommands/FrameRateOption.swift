import CoordCore

/// `--fps` as written (CONTRACT §13): a whole number, `N/D` or one of 23.976, 29.97, 59.94; anything else is a
/// usage error (exit 2) in one sentence.
func frameRate(_ text: String, flag: String = "--fps") throws -> FrameRate {
    switch FrameRate.parse(text, field: flag) {
    case .success(let rate): return rate
    case .failure(let problem): throw usageError(problem.sentence)
    }
}

/// The help line every `--fps` shares.
let frameRateHelp = "an integer, N/D (30000/1001, 24000/1001, 60000/1001) or 23.976, 29.97, 59.94"
