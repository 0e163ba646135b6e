import Foundation
import Platform
import VersionedYAML
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

    /// Writes the controls the operator set here into the console's own rig file (never any other path), editing
    /// its text in place: only the control values that change are replaced or inserted, every comment, blank line
    /// and other value kept. The result is loaded as `coord console --rig` would load it, the file as it was is kept
    /// as `<file>.bak`, then the new text is written beside the file, fsynced and renamed over it, so a crash leaves
    /// the old file or the new one, never half of one. Refused with one sentence, writing nothing, when the console
    /// has no rig file (a demo), the file cannot be read or changed on disk since the console loaded it, the edited
    /// text would not load, or the directory cannot be written.
    public func saveRigFile() throws(Refusal) -> SavedRigFile {
        guard let path = rigFile else {
            throw Refusal(.conflict, "this console has no rig file to save into (a demo's rig lives in memory): download it (rig.yaml) and start coord console --rig with it.")
        }
        let name = (path as NSString).lastPathComponent
        let current: String
        do throws(YAMLFileError) { current = try VersionedYAML.read(path, kind: "rig file") } catch {
            throw Refusal(.conflict, "the rig file cannot be read any more, so nothing was saved: \(error.description)")
        }
        // Someone else's edit since the console loaded the file is not overwritten with the console's old view of it.
        guard let loaded = state.withLock({ $0.rigFileText }), loaded == current else {
            throw Refusal(.conflict, "\(path) changed on disk since this console loaded it, so it was left as it is: restart coord console --rig \(name) to load it, set the controls again and save.")
        }
        let file = try rigFileWithControls(original: current)
        // Never write what the next `coord console --rig` would refuse.
        let saved: RigFile
        do { saved = try RigFile.parse(file.text, path: path) } catch {
            throw Refusal(.conflict, "the rig file with the controls written in would not load, so \(path) was left as it is: \(error)")
        }
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        guard Glibc.access(directory, W_OK) == 0 else {
            throw Refusal(.conflict, "the rig file's directory \(directory) is not writable by this console, so \(name) was left as it is.")
        }
        var mode = stat()
        let permissions = stat(path, &mode) == 0 ? mode_t(mode.st_mode & 0o777) : 0o644
        let backup = path + ".bak"
        if let problem = Self.replace(backup, with: Data(current.utf8), permissions: permissions)
            ?? Self.replace(path, with: Data(file.text.utf8), permissions: permissions) {
            throw Refusal(.conflict, "\(name) was left as it is: \(problem)")
        }
        state.withLock { $0.rigFileText = file.text }
        let cameras = saved.spec.nodes.reduce(0) { count, node in count + (node.cameras ?? []).filter { $0.controls != nil }.count }
        event("rig-file-saved", node: nil, camera: nil, "the controls set in this console saved into \(path) (the file as it was: \(backup))")
        return SavedRigFile(path: path, backup: backup, cameras: cameras)
    }

    /// Puts `data` at `path` atomically: a temporary file in the same directory, written and fsynced, renamed over
    /// `path`, then the directory fsynced. Nil, or why it failed (the temporary file removed).
    static func replace(_ path: String, with data: Data, permissions: mode_t) -> String? {
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        let temporary = "\(directory)/.\((path as NSString).lastPathComponent).\(getpid()).tmp"
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open") { Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, permissions) } } catch {
            return "cannot create \(temporary): \(error.reason)."
        }
        var failure: String?
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                do throws(POSIXFailure) {
                    offset += try POSIX.retryingEINTR("write") { Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
                } catch {
                    failure = "cannot write \(temporary): \(error.reason)."
                    return
                }
            }
        }
        if failure == nil {
            do { try POSIX.retryingEINTR("fsync") { fsync(fd) } } catch { failure = "cannot flush \(temporary) to disk: \(error.reason)." }
        }
        Glibc.close(fd)
        if failure == nil {
            do { try POSIX.retryingEINTR("rename") { Glibc.rename(temporary, path) } } catch {
                failure = "cannot rename \(temporary) to \(path): \(error.reason)."
            }
        }
        if let failure {
            Glibc.unlink(temporary)
            return failure
        }
        if let dirFD = try? POSIX.retryingEINTR("open", nil, { Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }) {
            _ = try? POSIX.retryingEINTR("fsync") { fsync(dirFD) }
            Glibc.close(dirFD)
        }
        return nil
    }
}
