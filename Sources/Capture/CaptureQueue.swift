import Foundation

/// Frames a camera's own thread has captured, waiting for the recorder's `next`: one lock and one condition, so a
/// wait cannot miss the signal of a frame appended between its look and its sleep. The synthetic sensor and the
/// libcamera camera share it; `wake` ends a wait early (a stop), `waitFor` sleeps until a predicate holds.
// @unchecked: every field is touched only while `condition` is held.
public final class CaptureQueue<Item: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Item] = []

    public init() {}

    /// Appends one captured item and wakes one waiter.
    public func push(_ item: Item) {
        condition.lock()
        items.append(item)
        condition.signal()
        condition.unlock()
    }

    /// The oldest item, waiting at most `timeoutMicroseconds`; nil on timeout, or as soon as the queue is empty
    /// while `streaming()` says the source has stopped.
    public func next(timeoutMicroseconds: Int64, streaming: () -> Bool) -> Item? {
        let deadline = Date().addingTimeInterval(Double(timeoutMicroseconds) / 1_000_000)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if !items.isEmpty { return items.removeFirst() }
            if !streaming() { return nil }
            if !condition.wait(until: deadline) { return nil }
        }
    }

    /// Wakes every waiter so it looks again (after a stop, or when what `waitFor` waits on changed).
    public func wake() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Sleeps until `done()` holds (checked after each `push` or `wake`) or the deadline passes; returns `done()`.
    @discardableResult
    public func waitFor(until deadline: Date, _ done: () -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            if !condition.wait(until: deadline) { return done() }
        }
        return true
    }

    /// Takes every item still queued (their buffers go back to the source's pool).
    public func drain() -> [Item] {
        condition.lock()
        defer { condition.unlock() }
        let all = items
        items.removeAll()
        return all
    }

    public var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return items.count
    }
}
