extension Duration {
    /// This interval in whole µs (truncated toward zero), the unit of the rig's clocks.
    public var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds.multipliedReportingOverflow(by: 1_000_000).overflow
            ? (seconds < 0 ? .min : .max)
            : seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
