/// How the process's allocator treats big buffers (frames, chunks).
public enum Memory {
    /// Every allocation of 256 KiB or more is its own mapping, returned to the system when freed. glibc would
    /// otherwise raise this threshold after the first large free and serve later frames from its heaps, where
    /// each take's buffers (megabytes per 1080p frame, on threads that come and go) fragment and stay resident:
    /// measured +3.5 MiB per armed take of two 1080p cameras, without bound.
    public static func returnLargeBuffersToTheSystem() {
        #if os(Linux)
        _ = glibc_mallopt(mmapThreshold, 256 * 1024)
        #endif
    }

    /// `M_MMAP_THRESHOLD` of glibc's <malloc.h>, which the Glibc module does not export.
    private static let mmapThreshold: Int32 = -3
}

#if os(Linux)
// int mallopt(int param, int value): in glibc, declared in <malloc.h>.
@_silgen_name("mallopt")
private func glibc_mallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif

/// Starting a file's writeback early, while more of it is still arriving.
public enum Writeback {
    /// Asks the kernel to begin writing `length` bytes at `offset` of `fd` to the disk, without waiting: the final
    /// fsync then finds little left to do, and dirty pages never pile up. Best effort; errors surface at fsync.
    public static func start(fd: Int32, offset: Int64, length: Int64) {
        #if os(Linux)
        _ = glibc_sync_file_range(fd, offset, length, syncFileRangeWrite)
        #endif
    }

    /// `SYNC_FILE_RANGE_WRITE` of <fcntl.h> (a _GNU_SOURCE name the Glibc module does not export).
    private static let syncFileRangeWrite: UInt32 = 2
}

#if os(Linux)
// int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags): glibc, <fcntl.h> with _GNU_SOURCE.
@_silgen_name("sync_file_range")
private func glibc_sync_file_range(_ fd: Int32, _ offset: Int64, _ length: Int64, _ flags: UInt32) -> Int32
#endif
