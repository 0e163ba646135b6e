import CoordCore
import Crypto
import Foundation
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// The collector's file identities, its sentences for a failed write, its rate limit and byte figures.
extension Collector {
    /// A file's device, inode and size: the same three at the final name mean the verified copy is there.
    struct Identity: Equatable {
        var device: UInt64, inode: UInt64, bytes: UInt64
    }

    static func identity(fd: Int32) -> Identity? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), bytes: UInt64(max(0, st.st_size)))
    }

    static func identity(path: String) -> Identity? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), bytes: UInt64(max(0, st.st_size)))
    }

    /// The take's own copy of `path` (relative to `directory`): its size, and its digest by the hash the node stated
    /// when its size is the node's; nils when there is none. Read through the take funnel, so a link, FIFO or device in
    /// its place or on the way to it is refused with a sentence, never followed or opened.
    static func local(_ path: String, in directory: URL, like file: TakeManifest.File) throws(TakeFileError) -> (bytes: UInt64?, digest: String?) {
        let take = try TakeDirectory.open(directory.path)
        guard try take.checkFile(path) else { return (nil, nil) }
        let copy = try take.file(path)
        guard copy.size == file.bytes else { return (copy.size, nil) }
        var sha = file.xxh128.isEmpty ? SHA256() : nil
        let xxh = file.xxh128.isEmpty ? nil : XXH128.Hasher()
        do {
            try copy.read { bytes in
                if let xxh { xxh.update(bytes) } else { sha?.update(bufferPointer: bytes) }
            }
        } catch {
            return (copy.size, nil)
        }
        return (copy.size, xxh?.hex() ?? sha.map { FileDigest.hex($0.finalize()) })
    }

    /// The size of the regular file at `path` (relative to `directory`), nil when there is none; anything else refused.
    static func localSize(_ path: String, in directory: URL) throws(TakeFileError) -> UInt64? {
        guard let take = try? TakeDirectory.open(directory.path), try take.checkFile(path) else { return nil }
        return try take.entry(path)?.size
    }

    /// What went wrong writing a copy, in the operator's words: a full disk, a read-only one, or no descriptors left.
    static func fileProblem(_ code: Int32) -> String {
        switch code {
        case EMFILE, ENFILE: return "the coordinator is out of file descriptors (errno \(code)); raise its limit (ulimit -n) or collect fewer nodes at once"
        case ENOSPC, EDQUOT: return "the coordinator's disk is full (errno \(code))"
        case EROFS: return "the coordinator's disk is read-only (errno \(code))"
        default: return "\(POSIX.text(code)) (errno \(code))"
        }
    }

    static func fileProblem(_ error: Error) -> String {
        let ns = error as NSError
        if let u = ns.userInfo[NSUnderlyingErrorKey] as? Error, (u as NSError).domain == NSPOSIXErrorDomain { return fileProblem(Int32((u as NSError).code)) }
        if ns.domain == NSPOSIXErrorDomain { return fileProblem(Int32(ns.code)) }
        return reason(error)
    }
}

/// The check a copy must pass as its bytes arrive: the node's xxh128 (memory speed), or its SHA-256 when the node
/// predates xxh128. One owner at a time (a node's fetcher).
final class ArrivalCheck {
    private var sha: SHA256?
    private let xxh: XXH128.Hasher?
    /// The digest the node stated, and the hash's name for the sentences.
    let expected: String
    let name: String

    init(_ file: TakeManifest.File) {
        if file.xxh128.isEmpty {
            sha = SHA256(); xxh = nil; expected = file.sha256; name = "sha256"
        } else {
            sha = nil; xxh = XXH128.Hasher(); expected = file.xxh128; name = "xxh128"
        }
    }

    func update(_ data: Data) {
        if xxh != nil { xxh?.update(data) } else { sha?.update(data: data) }
    }

    func reset() {
        if let xxh { xxh.reset() } else { sha = SHA256() }
    }

    /// The digest so far, in the node's notation.
    func digest() -> String {
        if let xxh { return xxh.hex() }
        return sha.map { FileDigest.hex($0.finalize()) } ?? ""
    }
}

/// A token bucket shared by every node's fetcher: the whole collection's rate stays under the limit.
final class RateLimiter: Sendable {
    private let bytesPerSecond: Double
    /// The instant (µs) from which the next bytes may go.
    private let nextFree = Mutex<Int64>(0)

    init(bytesPerSecond: Double) { self.bytesPerSecond = bytesPerSecond }

    /// Books `bytes` and returns how long (µs) to wait before sending them.
    private func reserve(_ bytes: Int) -> Int64 {
        nextFree.withLock { nextFree in
            let now = MonotonicClock.now()
            // A little burst is allowed (a quarter second's worth), no more.
            let start = max(nextFree, now - 250_000)
            nextFree = start + Int64(Double(bytes) / bytesPerSecond * 1e6)
            return start - now
        }
    }

    /// Waits until `bytes` more may be requested.
    func take(_ bytes: Int) async {
        let wait = reserve(bytes)
        if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(wait) * 1000) }
    }
}

func formatBytes(_ bytes: UInt64) -> String {
    let b = Double(bytes)
    if b >= 1_073_741_824 { return String(format: "%.2f GiB", b / 1_073_741_824) }
    if b >= 1_048_576 { return String(format: "%.1f MiB", b / 1_048_576) }
    if b >= 1024 { return String(format: "%.1f KiB", b / 1024) }
    return "\(bytes) B"
}
