import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The operator-facing reason for a Foundation file error: the underlying errno's text ("Not a directory",
/// "No space left on device") rather than Foundation's generic "The operation could not be completed".
public func reason(_ error: Error) -> String {
    let ns = error as NSError
    if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
        return "\(String(cString: strerror(Int32(underlying.code)))) (errno \(underlying.code))"
    }
    if ns.domain == NSPOSIXErrorDomain {
        return "\(String(cString: strerror(Int32(ns.code)))) (errno \(ns.code))"
    }
    return ns.localizedDescription
}
