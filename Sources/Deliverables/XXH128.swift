import CXXHash
import Foundation

/// xxh128 (XXH3, 128 bits) of whole files, streamed through libxxhash: ASC MHL's default hash.
public enum XXH128 {
    /// Lower-case hex of the canonical (big-endian) digest, as `xxhsum -H2` and ASC MHL write it. `progress` gets the
    /// bytes read since its last call.
    public static func file(_ path: String, progress: (Int64) -> Void = { _ in }) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw DeliverFailure("cannot read \(path) to hash it.") }
        defer { try? handle.close() }
        guard let state = XXH3_createState() else { throw DeliverFailure("cannot hash \(path): out of memory.") }
        defer { XXH3_freeState(state) }
        XXH3_128bits_reset(state)
        while true {
            let chunk: Data
            do { chunk = try handle.read(upToCount: 4 << 20) ?? Data() } catch {
                throw DeliverFailure("cannot read \(path) to hash it: \(error.localizedDescription).")
            }
            if chunk.isEmpty { break }
            chunk.withUnsafeBytes { _ = XXH3_128bits_update(state, $0.baseAddress, $0.count) }
            progress(Int64(chunk.count))
        }
        return hex(XXH3_128bits_digest(state))
    }

    /// xxh128 of bytes in memory.
    public static func bytes(_ data: Data) -> String {
        hex(data.withUnsafeBytes { XXH3_128bits($0.baseAddress, $0.count) })
    }

    private static func hex(_ hash: XXH128_hash_t) -> String {
        var out = [UInt8](repeating: 0, count: 16)
        cxxh_canonical128(hash, &out)
        return out.map { String(format: "%02x", $0) }.joined()
    }
}
