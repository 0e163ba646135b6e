import Crypto
import Foundation

/// The SHA-256 (and xxh128) every take file is checked by, on the node that wrote it and on the coordinator that collects
/// it: one implementation, so both sides always hash the same way.
public enum FileDigest {
    /// Lower-case hex, as in the manifest.
    public static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    /// Size and SHA-256 of the file at `url`; throws a sentence naming the file.
    public static func sha256(of url: URL) throws -> (bytes: UInt64, sha256: String) {
        let d = try digests(of: url, xxh128: false)
        return (d.bytes, d.sha256)
    }

    /// Size, SHA-256 and xxh128 of the file at `url` in one read (a node's file as it is finalized).
    public static func sha256AndXXH128(of url: URL) throws -> (bytes: UInt64, sha256: String, xxh128: String) {
        try digests(of: url, xxh128: true)
    }

    private static func digests(of url: URL, xxh128: Bool) throws -> (bytes: UInt64, sha256: String, xxh128: String) {
        let handle: FileHandle
        do { handle = try FileHandle(forReadingFrom: url) } catch {
            throw FileDigestError("cannot read \(url.path) to checksum it: \(reason(error)).")
        }
        defer { try? handle.close() }
        var hasher = SHA256()
        let fast = xxh128 ? XXH128.Hasher() : nil
        var total: UInt64 = 0
        while true {
            let data: Data
            do { data = try handle.read(upToCount: 4 << 20) ?? Data() } catch {
                throw FileDigestError("reading \(url.path) failed: \(reason(error)).")
            }
            if data.isEmpty { break }
            hasher.update(data: data)
            fast?.update(data)
            total += UInt64(data.count)
        }
        return (total, hex(hasher.finalize()), fast?.hex() ?? "")
    }
}

public struct FileDigestError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
