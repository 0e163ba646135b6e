import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The controls the operator settled on, saved as the rig file's defaults from the console.
extension LiveRig {
    /// What a save wrote: the rig file, the copy of it as it was, and how many cameras' controls it now holds.
    public struct SavedRigFile: Sendable, Equatable {
        public var path: String
        public var backup: String
        public var cameras: Int
    }

    /// Writes the rig file with every camera's controls as now in force over the console's own rig file (never any
    /// other path): the file as it was, comments included, is kept as `<file>.bak`, then the new text is written
    /// beside the file, fsynced and renamed over it, so a crash leaves the old file or the new one, never half of
    /// one. Refused with one sentence, writing nothing, when the console has no rig file (a demo), the file cannot
    /// be read, the new text would not load, or the directory cannot be written.
    public func saveRigFile() throws(Refusal) -> SavedRigFile {
        guard let path = rigFile else {
            throw Refusal(.conflict, "this console has no rig file to save into (a demo's rig lives in memory): download it (rig.yaml) and start coord console --rig with it.")
        }
        let file = try rigFileWithControls()
        let backup = path + ".bak"
        let name = (path as NSString).lastPathComponent
        // Never write what the next `coord console --rig` would refuse.
        do { _ = try RigFile.parse(file.text, path: path) } catch {
            throw Refusal(.conflict, "the rig file with the controls written in would not load, so \(path) was left as it is: \(error)")
        }
        let original: Data
        do { original = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw Refusal(.conflict, "the rig file \(path) cannot be read any more: \(error.localizedDescription)")
        }
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        guard Glibc.access(directory, W_OK) == 0 else {
            throw Refusal(.conflict, "the rig file's directory \(directory) is not writable by this console, so \(name) was left as it is.")
        }
        let header = "# The file as it was before, with its comments, is \(name).bak beside it.\n"
        let lines = file.text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let text = lines.count == 2 ? "\(lines[0])\n\(header)\(lines[1])" : header + file.text
        var mode = stat()
        let permissions = stat(path, &mode) == 0 ? mode_t(mode.st_mode & 0o777) : 0o644
        if let problem = Self.replace(backup, with: original, permissions: permissions)
            ?? Self.replace(path, with: Data(text.utf8), permissions: permissions) {
            throw Refusal(.conflict, "\(name) was left as it is: \(problem)")
        }
        let cameras = state.withLock { s in
            s.nodes.reduce(0) { count, node in count + node.cameras.filter { !(node.controls[$0.camera]?.isEmpty ?? true) }.count }
        }
        event("rig-file-saved", node: nil, camera: nil, "the cameras' controls saved into \(path) (the file as it was: \(backup))")
        return SavedRigFile(path: path, backup: backup, cameras: cameras)
    }

    /// Puts `data` at `path` atomically: a temporary file in the same directory, written and fsynced, renamed over
    /// `path`, then the directory fsynced. Nil, or why it failed (the temporary file removed).
    static func replace(_ path: String, with data: Data, permissions: mode_t) -> String? {
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        let temporary = "\(directory)/.\((path as NSString).lastPathComponent).\(getpid()).tmp"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, permissions)
        guard fd >= 0 else { return "cannot create \(temporary): \(String(cString: strerror(errno)))." }
        var failure: String?
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = "cannot write \(temporary): \(String(cString: strerror(errno)))."
                    return
                }
                offset += n
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = "cannot flush \(temporary) to disk: \(String(cString: strerror(errno)))." }
        Glibc.close(fd)
        if failure == nil, Glibc.rename(temporary, path) != 0 { failure = "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))." }
        if let failure {
            Glibc.unlink(temporary)
            return failure
        }
        let dirFD = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            Glibc.close(dirFD)
        }
        return nil
    }
}
