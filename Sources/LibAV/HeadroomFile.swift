// A recording's file with disk space held past its end, so a disk that fills mid-take is noticed while the file can
// still be finished: its last frames, its index and its trailer go into space already allocated to it.
import CFFmpeg

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The disk calls a `HeadroomFile` makes, each returning 0 or the errno; a test replaces them to fill a disk.
struct DiskCalls: Sendable {
    /// fallocate(2) with FALLOC_FL_KEEP_SIZE: holds blocks past the end without changing the file's size.
    var allocate: @Sendable (_ fd: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) -> Int32
    /// pwrite(2) of the whole buffer (short writes are continued here, EINTR retried).
    var write: @Sendable (_ fd: Int32, _ bytes: UnsafeRawBufferPointer, _ offset: Int64) -> Int32

    static let system = DiskCalls(
        allocate: { fd, mode, offset, length in cff_fallocate(fd, mode, offset, length) },
        write: { fd, bytes, offset in
            var done = 0
            while done < bytes.count {
                let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return 0
        })
}

/// A file written at a position (sequentially or after a seek back), keeping `headroom` bytes allocated past its end
/// (fallocate with FALLOC_FL_KEEP_SIZE: the size does not change, the blocks are this file's). When the disk has no
/// room for that headroom, `isShortOfSpace` turns true while the headroom already held is still there: the writer
/// stops taking frames and finishes the file in it. On a file system that cannot allocate ahead, writes go as they
/// come and a full disk is only seen as a failed write. Not thread-safe: one writer drives it.
public final class HeadroomFile {
    public let path: String
    private var fd: Int32
    private let calls: DiskCalls
    /// Where the next write goes, and the file's size.
    private var position: Int64 = 0
    public private(set) var size: Int64 = 0
    /// Blocks are held up to here (past `size` when headroom is held).
    private var allocatedTo: Int64 = 0
    /// Bytes kept allocated past the end of every write: what finishing the file needs at most (the writer raises it
    /// as the file grows).
    public var headroom: Int64
    /// The disk could not give the headroom (or a write): the file should be finished now.
    public private(set) var isShortOfSpace = false
    /// The file system allocates no space ahead (fallocate not supported): a full disk fails a write.
    public private(set) var cannotHoldHeadroom = false
    /// The errno that made the file short of space (ENOSPC or EDQUOT), or of the last failed write.
    public private(set) var spaceErrno: Int32 = 0

    /// Creates (truncating) `path`; throws the errno.
    public convenience init(path: String, headroom: Int64) throws(HeadroomFile.Failure) {
        try self.init(path: path, headroom: headroom, calls: .system)
    }

    init(path: String, headroom: Int64, calls: DiskCalls) throws(HeadroomFile.Failure) {
        self.path = path
        self.headroom = max(0, headroom)
        self.calls = calls
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw Failure(call: "open", code: errno) }
        self.fd = fd
    }

    deinit { _ = close() }

    /// A failed system call and its errno.
    public struct Failure: Error, Sendable, Equatable {
        public let call: String
        public let code: Int32
        /// The system's words for `code` ("No space left on device").
        public var reason: String { String(cString: strerror(code)) }
    }

    /// The open descriptor (-1 once closed), for fstat.
    public var descriptor: Int32 { fd }

    /// Why the file is short of space, in the system's words, once it is.
    public var spaceReason: String? { spaceErrno == 0 ? nil : String(cString: strerror(spaceErrno)) }

    /// fsync(2); returns 0 or the errno.
    @discardableResult
    public func synchronize() -> Int32 { fd >= 0 && fsync(fd) != 0 ? errno : 0 }

    /// `write` of a whole buffer of bytes.
    public func write(_ bytes: [UInt8]) -> Int32 { bytes.withUnsafeBytes { write($0) } }

    /// Whether `code` says the disk (or the user's quota) is full.
    public static func isSpace(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    /// Writes `bytes` at the current position, holding the headroom past them first; returns 0 or the errno.
    public func write(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard fd >= 0 else { return EBADF }
        guard bytes.count > 0 else { return 0 }
        let end = max(size, position + Int64(bytes.count))
        if !cannotHoldHeadroom, !isShortOfSpace, allocatedTo < end + headroom {
            hold(through: end)
        }
        let r = calls.write(fd, bytes, position)
        if r != 0 {
            if Self.isSpace(r) { isShortOfSpace = true }
            spaceErrno = r
            return r
        }
        position += Int64(bytes.count)
        size = max(size, position)
        return 0
    }

    /// Moves the position (SEEK_SET, SEEK_CUR, SEEK_END); returns it, or -1 with an unknown `whence`.
    public func seek(to offset: Int64, whence: Int32) -> Int64 {
        switch whence {
        case SEEK_SET: position = offset
        case SEEK_CUR: position += offset
        case SEEK_END: position = size + offset
        default: return -1
        }
        position = max(0, position)
        return position
    }

    /// Gives back the headroom still held (the blocks past the end) and closes the file; returns 0 or the errno of
    /// close. Idempotent.
    @discardableResult
    public func close() -> Int32 {
        guard fd >= 0 else { return 0 }
        if allocatedTo > size {
            // A truncate past the end and back frees the blocks held past it (a truncate to the same size frees
            // nothing on tmpfs, and ext4 punches no hole past the end).
            _ = ftruncate(fd, off_t(size + 1))
            _ = ftruncate(fd, off_t(size))
        }
        allocatedTo = size
        let r = closeDescriptor(fd)
        fd = -1
        return r == 0 ? 0 : errno
    }

    /// Holds blocks through `end` + the headroom + 4 KiB (so the disk is asked again once 4 KiB more are written:
    /// at every frame, and a disk filled by something else is noticed at the next one), or at least through `end`
    /// + the headroom; neither: short of space. Asking for blocks already held costs next to nothing.
    private func hold(through end: Int64) {
        let from = max(size, allocatedTo)
        for target in [end + headroom + 4096, end + headroom] where target > allocatedTo {
            let r = calls.allocate(fd, cff_FALLOC_FL_KEEP_SIZE, from, target - from)
            if r == 0 {
                allocatedTo = target
                return
            }
            if !Self.isSpace(r) {
                // EOPNOTSUPP (a FUSE or network file system) and the like: no headroom on this disk.
                cannotHoldHeadroom = true
                return
            }
            spaceErrno = r
        }
        isShortOfSpace = true
    }
}

/// close(2), out of the reach of `HeadroomFile.close`'s name.
private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
