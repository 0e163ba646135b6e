import Foundation
import Glibc
import Synchronization
import Testing
@testable import Capture

// The frame queue the synthetic sensor and the libcamera camera share: frames from another thread come out in
// order with none lost, a wait ends at its timeout, and a stop ends a wait at once rather than at the timeout.

@Suite struct CaptureQueueTests {
    @Test func framesFromAnotherThreadComeOutInOrderNoneLost() {
        let queue = CaptureQueue<Int>()
        let streaming = Atomic(true)
        let producer = Thread {
            for i in 0..<2_000 { queue.push(i) }
            streaming.store(false, ordering: .sequentiallyConsistent)
            queue.wake()
        }
        producer.start()
        var got: [Int] = []
        while let item = queue.next(timeoutMicroseconds: 10_000_000, streaming: { streaming.load(ordering: .sequentiallyConsistent) }) {
            got.append(item)
        }
        #expect(got == Array(0..<2_000))
    }

    @Test func anEmptyQueueWaitsItsTimeoutThenGivesNothing() {
        let queue = CaptureQueue<Int>()
        let start = Date()
        #expect(queue.next(timeoutMicroseconds: 50_000, streaming: { true }) == nil)
        #expect(Date().timeIntervalSince(start) >= 0.049)
    }

    @Test func aStopEndsAWaitLongBeforeItsTimeoutButQueuedFramesStillComeOut() {
        let queue = CaptureQueue<Int>()
        let streaming = Atomic(true)
        queue.push(7)
        #expect(queue.next(timeoutMicroseconds: 0, streaming: { false }) == 7)  // queued frames outlive the stop
        let waiting = Atomic(false)
        let stopper = Thread {
            // Stops only once the consumer has looked under the lock: the wake, not the timeout, must end its wait.
            while !waiting.load(ordering: .sequentiallyConsistent) { sched_yield() }
            streaming.store(false, ordering: .sequentiallyConsistent)
            queue.wake()
        }
        stopper.start()
        let start = Date()
        let result = queue.next(timeoutMicroseconds: 60_000_000) {
            waiting.store(true, ordering: .sequentiallyConsistent)
            return streaming.load(ordering: .sequentiallyConsistent)
        }
        #expect(result == nil)
        #expect(Date().timeIntervalSince(start) < 30)
        #expect(queue.count == 0)
    }

    @Test func waitForReturnsWhenThePredicateHoldsAfterAPush() {
        let queue = CaptureQueue<Int>()
        let pushed = Atomic(0)
        let producer = Thread {
            for i in 0..<5 {
                queue.push(i)
                pushed.add(1, ordering: .sequentiallyConsistent)
                queue.wake()
            }
        }
        producer.start()
        #expect(queue.waitFor(until: Date().addingTimeInterval(30)) { pushed.load(ordering: .sequentiallyConsistent) == 5 })
        #expect(queue.drain() == [0, 1, 2, 3, 4])
        #expect(!queue.waitFor(until: Date().addingTimeInterval(0.02)) { false })
    }
}
