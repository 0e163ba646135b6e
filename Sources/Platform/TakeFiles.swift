import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The one way into a take directory's contents (CONTRACT §14): every path is opened relative to the take's own
// directory, one component at a time with openat(O_NOFOLLOW), and only a regular file or a directory is ever used.
// A symbolic link, FIFO, device or socket anywhere in a path is refused with a sentence naming it; nothing is read
// or written through a link, and nothing blocks on a FIFO or device (it is never opened, or opened O_NONBLOCK).

/// Why a path inside a take directory was not used: one sentence naming it.
public struct TakeFileError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        case symbolicLink, fifo, characterDevice, blockDevice, socket
        /// A directory where a file was expected.
        case directory
        /// Something other than a directory where a folder was expected.
        case notDirectory
        /// `..`, `.` or an empty component: a path that could lead outside the take.
        case outside
        case missing
        /// Any other failure, by errno.
        case system(Int32)
    }

    /// The path as the sentence names it (the take directory's path, then the path inside it).
    public let path: String
    public let reason: Reason

    public init(path: String, reason: Reason) { self.path = path; self.reason = reason }

    /// Whether the path exists but is refused for what it is (a link, FIFO, device, socket or a path leading out).
    public var isRefusal: Bool {
        switch reason {
        case .symbolicLink, .fifo, .characterDevice, .blockDevice, .socket, .outside, .directory, .notDirectory: true
        case .missing, .system: false
        }
    }

    public var sentence: String {
        let p = TakeFileError.shown(path)
        let rule = "coord opens nothing in a take directory but its regular files and folders, and never follows a link"
        switch reason {
        case .symbolicLink: return "\(p) is a symbolic link; \(rule)."
        case .fifo: return "\(p) is a FIFO (named pipe), not a regular file; \(rule)."
        case .characterDevice: return "\(p) is a character device, not a regular file; \(rule)."
        case .blockDevice: return "\(p) is a block device, not a regular file; \(rule)."
        case .socket: return "\(p) is a socket, not a regular file; \(rule)."
        case .directory: return "\(p) is a directory, not a regular file."
        case .notDirectory: return "\(p) is not a directory."
        case .outside: return "\(p) leads outside the take directory; \(rule)."
        case .missing: return "\(p) does not exist."
        case .system(let code): return "cannot open \(p): \(POSIX.text(code)) (errno \(code))."
        }
    }

    public var description: String { sentence }

    /// A path as a sentence shows it: control characters escaped, an overlong one cut.
    static func shown(_ path: String) -> String {
        var out = ""
        for scalar in path.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7f || (0x80..<0xa0).contains(scalar.value) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out.count <= 240 ? out : String(out.prefix(240)) + "…"
    }

    /// The reason for what `mode` (st_mode) is, when it is not a regular file or directory.
    static func reason(mode: mode_t) -> Reason? {
        switch mode & S_IFMT {
        case S_IFLNK: .symbolicLink
        case S_IFIFO: .fifo
        case S_IFCHR: .characterDevice
        case S_IFBLK: .blockDevice
        case S_IFSOCK: .socket
        default: nil
        }
    }
}

/// What an entry of a take folder is, read without following it.
public struct TakeEntry: Equatable, Sendable {
    public enum Kind: Equatable, Sendable { case file, directory, other(TakeFileError.Reason) }
    public var name: String
    public var kind: Kind
    public var size: UInt64
    /// Modification time, seconds since 1970.
    public var modified: Double
}

/// An open regular file inside a take directory: its descriptor (closed when this goes) and size.
public final class TakeFile: Sendable {
    public let fd: Int32
    /// The path the sentences name.
    public let path: String
    public let size: UInt64
    public let modified: Double

    init(fd: Int32, path: String, stat st: stat) {
        self.fd = fd; self.path = path
        size = UInt64(max(0, st.st_size))
        modified = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
    }

    deinit { _ = close(fd) }

    /// A name for this very file that a library taking only a path (libav) opens without resolving the take's path
    /// again: valid while this object lives.
    public var procPath: String { "/proc/self/fd/\(fd)" }

    /// Every byte from the start, `chunk` bytes at a time, handed to `body` (the buffer is valid only during the call).
    public func read(chunk: Int = 4 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let n: Int
            do { n = try POSIX.retryingEINTR("pread", path) { pread(fd, buffer.baseAddress, chunk, offset) } } catch {
                throw TakeFileError(path: path, reason: .system(error.errno))
            }
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += off_t(n)
        }
    }

    /// The whole file, refused past `limit` bytes (a manifest or table is small; a file that is not is not one).
    public func data(limit: Int = 256 << 20) throws -> Data {
        guard size <= UInt64(limit) else {
            throw TakeFileError(path: path, reason: .system(EFBIG))
        }
        var out = Data()
        out.reserveCapacity(Int(size))
        try read(chunk: 1 << 20) { out.append(contentsOf: $0) }
        return out
    }
}

/// A directory of a take, open: every path below it is opened through `openat`, component by component, never
/// following a link. Closed when this goes.
public final class TakeDirectory: Sendable {
    public let fd: Int32
    /// The path the sentences name.
    public let path: String

    private init(fd: Int32, path: String) { self.fd = fd; self.path = path }

    deinit { _ = close(fd) }

    /// The take directory itself at `path` (the operator's own path, so a link to it is followed there and only there).
    public static func open(_ path: String) throws(TakeFileError) -> TakeDirectory {
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open", path) { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK) } } catch {
            let code = error.errno
            var st = stat()
            if code == ENOTDIR || (stat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFDIR) {
                throw TakeFileError(path: path, reason: .notDirectory)
            }
            throw TakeFileError(path: path, reason: code == ENOENT ? .missing : .system(code))
        }
        return TakeDirectory(fd: fd, path: path)
    }

    private func shown(_ relative: String) -> String { relative.isEmpty ? path : path + "/" + relative }

    /// The components of `relative`, or a refusal for one that could lead out of the take.
    private func components(_ relative: String) throws(TakeFileError) -> [String] {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !relative.isEmpty, !relative.hasPrefix("/"),
              parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && !$0.utf8.contains(0) }) else {
            throw TakeFileError(path: shown(relative), reason: .outside)
        }
        return parts
    }

    /// What `name` in the directory `dirfd` is, without following it; nil when it does not exist.
    private static func status(_ dirfd: Int32, _ name: String, shown: String) throws(TakeFileError) -> stat? {
        var st = stat()
        do { try POSIX.retryingEINTR("fstatat", shown) { fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) } } catch {
            let code = error.errno
            if code == ENOENT { return nil }
            throw TakeFileError(path: shown, reason: code == ENOTDIR ? .notDirectory : .system(code))
        }
        return st
    }

    /// Opens the folder `name` of `dirfd` (creating it when `create`), refusing anything but a real directory.
    private static func openFolder(_ dirfd: Int32, _ name: String, shown: String, create: Bool) throws(TakeFileError) -> Int32 {
        var lookedAgain = 0
        while true {
            let code: Int32
            do {
                return try POSIX.retryingEINTR("openat", shown) { openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }
            } catch { code = error.errno }
            guard let st = try status(dirfd, name, shown: shown) else {
                guard create else { throw TakeFileError(path: shown, reason: .missing) }
                do { try POSIX.retryingEINTR("mkdirat", shown) { mkdirat(dirfd, name, 0o755) } } catch where error.errno != EEXIST {
                    throw TakeFileError(path: shown, reason: .system(error.errno))
                } catch {}
                continue
            }
            if let r = TakeFileError.reason(mode: st.st_mode) { throw TakeFileError(path: shown, reason: r) }
            // Missing at openat, a folder at the look after: another collector thread made it in between (two nodes'
            // copies start together and both make `.coord~partial`); open it again rather than fail the take.
            if code == ENOENT && (st.st_mode & S_IFMT) == S_IFDIR && lookedAgain < 3 { lookedAgain += 1; continue }
            throw TakeFileError(path: shown, reason: (st.st_mode & S_IFMT) == S_IFDIR ? .system(code) : .notDirectory)
        }
    }

    /// The folder at `relative` below this one (created, each missing level, when `create`).
    public func directory(_ relative: String, create: Bool = false) throws(TakeFileError) -> TakeDirectory {
        let parts = try components(relative)
        var current = fd
        var done: [String] = []
        defer { if current != fd { _ = close(current) } }
        for part in parts {
            done.append(part)
            let next = try Self.openFolder(current, part, shown: shown(done.joined(separator: "/")), create: create)
            if current != fd { _ = close(current) }
            current = next
        }
        let opened = current
        current = fd
        return TakeDirectory(fd: opened, path: shown(relative))
    }

    /// The folder holding `relative`'s last component, and that component.
    private func parent(of relative: String, create: Bool = false) throws(TakeFileError) -> (TakeDirectory?, String) {
        let parts = try components(relative)
        guard parts.count > 1 else { return (nil, parts[0]) }
        return (try directory(parts.dropLast().joined(separator: "/"), create: create), parts.last!)
    }

    /// The regular file at `relative`, open for reading. A FIFO, device or socket is refused before it is opened.
    public func file(_ relative: String) throws(TakeFileError) -> TakeFile {
        let (folder, name) = try parent(of: relative)
        let dirfd = folder?.fd ?? fd
        let shown = shown(relative)
        guard let before = try Self.status(dirfd, name, shown: shown) else { throw TakeFileError(path: shown, reason: .missing) }
        if let r = TakeFileError.reason(mode: before.st_mode) { throw TakeFileError(path: shown, reason: r) }
        if (before.st_mode & S_IFMT) == S_IFDIR { throw TakeFileError(path: shown, reason: .directory) }
        let opened: Int32
        do { opened = try POSIX.retryingEINTR("openat", shown) { openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) } } catch {
            let code = error.errno
            throw TakeFileError(path: shown, reason: code == ELOOP ? .symbolicLink : code == ENOENT ? .missing : .system(code))
        }
        // Whatever it was swapped for between the look and the open: checked on the descriptor itself.
        var st = stat()
        do { try POSIX.retryingEINTR("fstat", shown) { fstat(opened, &st) } } catch {
            _ = close(opened)
            throw TakeFileError(path: shown, reason: .system(error.errno))
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            _ = close(opened)
            throw TakeFileError(path: shown, reason: TakeFileError.reason(mode: st.st_mode) ?? .directory)
        }
        return TakeFile(fd: opened, path: shown, stat: st)
    }

    /// The whole regular file at `relative` (see `TakeFile.data`).
    public func data(_ relative: String, limit: Int = 256 << 20) throws(TakeFileError) -> Data {
        let f = try file(relative)
        do { return try f.data(limit: limit) } catch { throw error as? TakeFileError ?? TakeFileError(path: f.path, reason: .system(EIO)) }
    }

    /// What `relative` is, without opening or following it (every folder on the way must be a real one); nil when
    /// it does not exist.
    public func entry(_ relative: String) throws(TakeFileError) -> TakeEntry? {
        let (folder, name) : (TakeDirectory?, String)
        do { (folder, name) = try parent(of: relative) } catch where error.reason == .missing { return nil }
        guard let st = try Self.status(folder?.fd ?? fd, name, shown: shown(relative)) else { return nil }
        return Self.entry(name, st)
    }

    private static func entry(_ name: String, _ st: stat) -> TakeEntry {
        let kind: TakeEntry.Kind = switch st.st_mode & S_IFMT {
        case S_IFREG: .file
        case S_IFDIR: .directory
        default: .other(TakeFileError.reason(mode: st.st_mode) ?? .system(EINVAL))
        }
        return TakeEntry(name: name, kind: kind, size: UInt64(max(0, st.st_size)),
                         modified: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }

    /// Refuses `relative` unless it is a regular file or missing (nothing is opened); true when it is a file.
    @discardableResult
    public func checkFile(_ relative: String) throws(TakeFileError) -> Bool {
        guard let e = try entry(relative) else { return false }
        switch e.kind {
        case .file: return true
        case .directory: throw TakeFileError(path: shown(relative), reason: .directory)
        case .other(let r): throw TakeFileError(path: shown(relative), reason: r)
        }
    }

    /// This folder's entries (not `.` and `..`), each as it is, none followed.
    public func entries() throws(TakeFileError) -> [TakeEntry] {
        // fdopendir takes the descriptor over: hand it one of its own (a dup would share the listing's position).
        let copy: Int32
        do { copy = try POSIX.retryingEINTR("openat", path) { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK) } } catch {
            throw TakeFileError(path: path, reason: .system(error.errno))
        }
        guard let dir = fdopendir(copy) else { let code = POSIX.lastErrno; _ = close(copy); throw TakeFileError(path: path, reason: .system(code)) }
        defer { closedir(dir) }
        var out: [TakeEntry] = []
        while let e = readdir(dir) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            guard let st = try Self.status(fd, name, shown: path + "/" + name) else { continue }
            out.append(Self.entry(name, st))
        }
        return out.sorted { $0.name < $1.name }
    }

    /// Every regular file below this folder by relative path, folders walked without following any link; anything
    /// else (a link, FIFO, device, socket) refused. `skip` leaves out a relative path and, for a folder, all below it.
    public func regularFiles(skip: (String) -> Bool = { _ in false }) throws(TakeFileError) -> [String: TakeEntry] {
        var out: [String: TakeEntry] = [:]
        func walk(_ folder: TakeDirectory, _ prefix: String) throws(TakeFileError) {
            for e in try folder.entries() {
                let relative = prefix.isEmpty ? e.name : prefix + "/" + e.name
                if skip(relative) { continue }
                switch e.kind {
                case .file: out[relative] = e
                case .directory: try walk(try directory(relative), relative)
                case .other(let r): throw TakeFileError(path: shown(relative), reason: r)
                }
            }
        }
        try walk(self, "")
        return out
    }

    /// A new file at `relative` (its folders created as needed), open for writing: created here, never through a
    /// link, and never an existing file (O_EXCL). Returns the descriptor; the caller closes it.
    public func create(_ relative: String, mode: mode_t = 0o644) throws(TakeFileError) -> Int32 {
        let (folder, name) = try parent(of: relative, create: true)
        let fd: Int32
        do {
            fd = try POSIX.retryingEINTR("openat", shown(relative)) { openat(folder?.fd ?? self.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        } catch {
            let code = error.errno
            if code == EEXIST, let st = try Self.status(folder?.fd ?? self.fd, name, shown: shown(relative)),
               let r = TakeFileError.reason(mode: st.st_mode) {
                throw TakeFileError(path: shown(relative), reason: r)
            }
            throw TakeFileError(path: shown(relative), reason: .system(code))
        }
        return fd
    }

    /// Renames `from` to `to` (both relative to this folder, `to`'s folders created as needed); a link at `to` is
    /// replaced, never followed.
    public func rename(_ from: String, to: String) throws(TakeFileError) {
        let (a, aName) = try parent(of: from)
        let (b, bName) = try parent(of: to, create: true)
        do { try POSIX.retryingEINTR("renameat", shown(to)) { renameat(a?.fd ?? fd, aName, b?.fd ?? fd, bName) } } catch {
            throw TakeFileError(path: shown(to), reason: .system(error.errno))
        }
    }

    /// Removes the file (or link) at `relative` itself, never what a link points at; a missing one is no error.
    public func remove(_ relative: String) {
        guard let (folder, name) = try? parent(of: relative) else { return }
        _ = unlinkat(folder?.fd ?? fd, name, 0)
    }

    /// Writes `data` to `relative` under a temporary name beside it, then renames it into place: `relative` is
    /// either its old bytes or the new, and a link there is replaced, not written through.
    public func writeAtomically(_ data: Data, to relative: String) throws(TakeFileError) {
        let parts = try components(relative)
        let temporary = (parts.dropLast() + [".\(parts.last!).part-\(getpid())"]).joined(separator: "/")
        remove(temporary)
        let out = try create(temporary)
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                do throws(POSIXFailure) { done += try POSIX.retryingEINTR("write") { write(out, raw.baseAddress! + done, raw.count - done) } } catch {
                    failure = error.errno
                    return
                }
            }
        }
        _ = close(out)
        if failure != 0 {
            remove(temporary)
            throw TakeFileError(path: shown(relative), reason: .system(failure))
        }
        do { try rename(temporary, to: relative) } catch {
            remove(temporary)
            throw error
        }
    }
}
