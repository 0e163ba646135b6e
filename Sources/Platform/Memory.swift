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
