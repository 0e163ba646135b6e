/// The pixel size a kept still's file says it has (a PNG's IHDR, a baseline TIFF's first IFD): what the shot's
/// manifest states, since a camera that could not switch to the still's mode is kept at its preview's size.
public enum StillImageSize {
    /// Width and height, or nil when `bytes` is neither a PNG nor a TIFF that states both.
    public static func of(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        png(bytes) ?? tiff(bytes)
    }

    static func png(_ b: [UInt8]) -> (width: Int, height: Int)? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard b.count >= 24, Array(b[0..<8]) == signature, Array(b[12..<16]) == Array("IHDR".utf8) else { return nil }
        let w = big(b, 16, 4), h = big(b, 20, 4)
        return w > 0 && h > 0 ? (w, h) : nil
    }

    static func tiff(_ b: [UInt8]) -> (width: Int, height: Int)? {
        guard b.count >= 8 else { return nil }
        let little: Bool
        switch (b[0], b[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        let read = { (at: Int, n: Int) -> Int? in at >= 0 && at + n <= b.count ? (little ? littleEndian(b, at, n) : big(b, at, n)) : nil }
        guard read(2, 2) == 42, let ifd = read(4, 4), let count = read(ifd, 2) else { return nil }
        var width: Int?, height: Int?
        for k in 0..<min(count, 512) {
            let entry = ifd + 2 + 12 * k
            guard let tag = read(entry, 2), let type = read(entry + 2, 2) else { return nil }
            // SHORT (3) or LONG (4), the value in the entry itself.
            let value = type == 3 ? read(entry + 8, 2) : type == 4 ? read(entry + 8, 4) : nil
            if tag == 256 { width = value }
            if tag == 257 { height = value }
        }
        guard let width, let height, width > 0, height > 0 else { return nil }
        return (width, height)
    }

    private static func big(_ b: [UInt8], _ at: Int, _ n: Int) -> Int {
        b[at..<at + n].reduce(0) { $0 << 8 | Int($1) }
    }

    private static func littleEndian(_ b: [UInt8], _ at: Int, _ n: Int) -> Int {
        b[at..<at + n].reversed().reduce(0) { $0 << 8 | Int($1) }
    }
}
