import Foundation
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// A file being written as a copy arrives, at explicit offsets, bypassing the page cache where the file system
/// allows (`O_DIRECT`): the bytes go from memory to the disk without being copied into the page cache first and
/// written back later. On this kind of machine that copy was 70 % of the collector's CPU, and the writeback
/// after it the other half of a durable copy's time. Where `O_DIRECT` is refused (tmpfs, some network file systems)
/// or a write is not block-aligned (a file's tail, a resumed copy), the write goes through the page cache instead.
/// Errors are errno values; `sync()` (fdatasync) makes everything written durable either way. One owner at a time.
public final class CopyFile {
    public private(set) var fd: Int32
    /// Whether writes at aligned offsets still bypass the page cache (cleared for good after the first unaligned one).
    public private(set) var direct: Bool
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0

    /// Direct I/O's alignment of memory, offsets and lengths: 4 KiB covers every logical block size in use.
    public static let alignment = 4096

    private init(fd: Int32, direct: Bool) {
        self.fd = fd
        self.direct = direct
    }

    deinit {
        buffer.map { Glibc.free($0) }
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Creates (or empties) the file at `path`, writing past the page cache when `direct` and the file system allow.
    public static func create(_ path: String, direct: Bool = true) throws(CopyFileError) -> CopyFile {
        // O_NOFOLLOW: a link in the copy's place is refused, never written through (CONTRACT §14).
        let flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW
        if direct {
            do throws(CopyFileError) {
                return CopyFile(fd: try call("open") { Glibc.open(path, flags | oDirect, 0o644) }, direct: true)
            } catch where error.errno == EINVAL {}
        }
        return CopyFile(fd: try call("open") { Glibc.open(path, flags, 0o644) }, direct: false)
    }

    /// Opens an existing copy to write more of it (a resumed one), as `create` does but keeping its bytes.
    public static func reopen(_ path: String) throws(CopyFileError) -> CopyFile {
        do throws(CopyFileError) {
            return CopyFile(fd: try call("open") { Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | oDirect) }, direct: true)
        } catch where error.errno == EINVAL {}
        return CopyFile(fd: try call("open") { Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }, direct: false)
    }

    /// Closes the file (once; later calls do nothing).
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    /// Writes all of `data` at `offset`.
    public func write(_ data: Data, at offset: UInt64) throws(CopyFileError) {
        var result: CopyFileError?
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            do throws(CopyFileError) { try write(base, count: bytes.count, at: offset) } catch { result = error }
        }
        if let result { throw result }
    }

    private func write(_ base: UnsafeRawPointer, count: Int, at offset: UInt64) throws(CopyFileError) {
        var done = 0
        if direct, offset % UInt64(Self.alignment) == 0 {
            let aligned = count - count % Self.alignment
            if aligned > 0 {
                // Direct I/O needs aligned memory: libzmq's messages are not, so the bytes go through one reused
                // buffer (a copy in memory that stays mapped, far cheaper than one into fresh page-cache pages).
                let source: UnsafeRawPointer
                if Int(bitPattern: base) % Self.alignment == 0 {
                    source = base
                } else {
                    let staging = try stagingBuffer(aligned)
                    staging.copyMemory(from: base, byteCount: aligned)
                    source = UnsafeRawPointer(staging)
                }
                try pwriteAll(source, count: aligned, at: offset)
                done = aligned
            }
        }
        if done < count {
            // An unaligned piece (a file's last bytes): through the page cache, and so is everything after it.
            if direct { try stopDirect() }
            try pwriteAll(base + done, count: count - done, at: offset + UInt64(done))
        }
    }

    private func stagingBuffer(_ count: Int) throws(CopyFileError) -> UnsafeMutableRawPointer {
        if let buffer, capacity >= count { return buffer }
        buffer.map { Glibc.free($0) }
        buffer = nil
        capacity = 0
        var p: UnsafeMutableRawPointer?
        do { try POSIX.returningErrno("posix_memalign") { posix_memalign(&p, Self.alignment, count) } } catch {
            throw CopyFileError(errno: error.errno)
        }
        guard let p else { throw CopyFileError(errno: ENOMEM) }
        buffer = p
        capacity = count
        return p
    }

    private func stopDirect() throws(CopyFileError) {
        let flags = try Self.call("fcntl") { fcntl(fd, F_GETFL) }
        try Self.call("fcntl") { fcntl(fd, F_SETFL, flags & ~Self.oDirect) }
        direct = false
    }

    private func pwriteAll(_ base: UnsafeRawPointer, count: Int, at offset: UInt64) throws(CopyFileError) {
        var done = 0
        while done < count {
            let n = try Self.call("pwrite") { pwrite(fd, base + done, count - done, off_t(offset) + off_t(done)) }
            if n == 0 { throw CopyFileError(errno: EIO) }
            done += n
        }
    }

    /// Cuts the file to `length` bytes (a copy started again from the start).
    public func truncate(to length: UInt64) throws(CopyFileError) {
        try Self.call("ftruncate") { ftruncate(fd, off_t(length)) }
    }

    /// Makes every byte written durable (fdatasync: direct writes may still sit in the disk's volatile cache).
    public func sync() throws(CopyFileError) {
        try Self.call("fdatasync") { fdatasync(fd) }
    }

    /// A call through the POSIX funnel (EINTR retried), its failure as the copy's errno.
    @discardableResult
    private static func call<Result: BinaryInteger>(_ name: String, _ body: () -> Result) throws(CopyFileError) -> Result {
        do { return try POSIX.retryingEINTR(name) { body() } } catch { throw CopyFileError(errno: error.errno) }
    }

    /// `O_DIRECT` of <fcntl.h> (a _GNU_SOURCE name the Glibc module does not export); its value differs by
    /// architecture.
    #if arch(x86_64) || arch(i386)
    static let oDirect: Int32 = 0o40000
    #else
    static let oDirect: Int32 = 0o200000  // arm64, arm: asm-generic's value
    #endif
}

/// A failed write of a copy: the errno, for the caller's sentence (a full disk reads differently from a bad one).
public struct CopyFileError: Error, Sendable {
    public let errno: Int32
}
