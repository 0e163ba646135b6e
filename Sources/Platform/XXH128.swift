import CXXHash
import Foundation

/// xxh128 (XXH3, 128 bits) through libxxhash: ASC MHL's default hash, and what a node's file is checked by as it
/// arrives at the coordinator. The one Swift file that calls CXXHash.
public enum XXH128 {
    /// Lower-case hex of the canonical (big-endian) digest of the file at `path`, as `xxhsum -H2` and ASC MHL write
    /// it. `progress` gets the bytes read since its last call; throws a sentence naming the file.
    public static func file(_ path: String, progress: (Int64) -> Void = { _ in }) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw FileDigestError("cannot read \(path) to hash it.") }
        defer { try? handle.close() }
        let hasher = Hasher()
        while true {
            let chunk: Data
            do { chunk = try handle.read(upToCount: 4 << 20) ?? Data() } catch {
                throw FileDigestError("cannot read \(path) to hash it: \(reason(error)).")
            }
            if chunk.isEmpty { break }
            hasher.update(chunk)
            progress(Int64(chunk.count))
        }
        return hasher.hex()
    }

    /// xxh128 of bytes in memory.
    public static func bytes(_ data: Data) -> String {
        hex(data.withUnsafeBytes { XXH3_128bits($0.baseAddress, $0.count) })
    }

    /// Whether `text` is an xxh128 as the wire and ASC MHL carry it: 32 lower-case hex digits.
    public static func isValid(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// A streaming digest: bytes in as they arrive, the hex at the end. One owner at a time (not Sendable).
    public final class Hasher {
        private let state: OpaquePointer?

        public init() {
            state = XXH3_createState()
            if let state { XXH3_128bits_reset(state) }
        }

        deinit { if let state { XXH3_freeState(state) } }

        /// Starts over, as if nothing had been hashed.
        public func reset() { if let state { XXH3_128bits_reset(state) } }

        public func update(_ data: Data) {
            data.withUnsafeBytes { update($0) }
        }

        public func update(_ bytes: UnsafeRawBufferPointer) {
            guard let state, bytes.count > 0 else { return }
            _ = XXH3_128bits_update(state, bytes.baseAddress, bytes.count)
        }

        /// The digest of everything so far (the state stays usable).
        public func hex() -> String {
            // XXH3_createState only fails out of memory; an empty string then never matches a real digest.
            guard let state else { return "" }
            return XXH128.hex(XXH3_128bits_digest(state))
        }
    }

    static func hex(_ hash: XXH128_hash_t) -> String {
        var out = [UInt8](repeating: 0, count: 16)
        cxxh_canonical128(hash, &out)
        return out.map { String(format: "%02x", $0) }.joined()
    }
}
