import Foundation

extension NSLock {
    /// Runs `body` holding the lock and releases it on every path, a thrown error included (a lock left held
    /// once froze a node for good). Typed throws pass through, unlike Foundation's `withLock`.
    @inlinable
    public func holding<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
