import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The operator-facing reason for a Foundation file error: the underlying errno's text ("Not a directory",
/// "No space left on device") rather than Foundation's generic "The operation could not be completed".
public func reason(_ error: Error) -> String {
    let ns = error as NSError
    // On Linux the underlying error is stored as a Swift `Error`, not an `NSError`.
    if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? Error {
        let u = underlying as NSError
        if u.domain == NSPOSIXErrorDomain { return "\(POSIX.text(Int32(u.code))) (errno \(u.code))" }
    }
    if ns.domain == NSPOSIXErrorDomain {
        return "\(POSIX.text(Int32(ns.code))) (errno \(ns.code))"
    }
    return ns.localizedDescription
}
