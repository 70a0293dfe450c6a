import LiaisonTestSupport
import Testing

@testable import Liaison

/// The logic of leases and their heartbeat, on a manual clock: no test here sleeps or bounds a
/// wall-clock duration. What the same promises are worth in real time across processes (a
/// stopped holder's lease lapsing, a heartbeat kept up under load) is checked by
/// `PresenceTests` and the chaos run.
@Suite("Leases on a manual clock")
struct LeaseClockTests {
  let directory = TemporaryDirectory()

  @Test func theManualClockWakesSleepersInDeadlineOrder() async throws {
    let manual = ManualClock()
    let clock = manual.clock
    let start = clock.now
    let order = Locked<[Int]>([])
    let first = Task {
      try await clock.sleep(until: start + .seconds(2))
      order.withLock { $0.append(2) }
    }
    await manual.waitForSleepers(1)
    let second = Task {
      try await clock.sleep(until: start + .seconds(1))
      order.withLock { $0.append(1) }
    }
    await manual.waitForSleepers(2)
    let wallStart = manual.wallSeconds
    let beats = Locked<[Duration]>([])
    let timer = clock.repeating(every: .milliseconds(700)) { beats.withLock { $0.append(clock.now - start) } }
    manual.advance(by: .milliseconds(999))
    #expect(manual.sleeperCount == 3)  // the timer, and both sleepers
    manual.advance(by: .milliseconds(1))
    try await second.value
    #expect(order.withLock { $0 } == [1])
    manual.advance(by: .seconds(1))
    try await first.value
    #expect(order.withLock { $0 } == [1, 2])
    #expect(beats.withLock { $0 } == [.milliseconds(700), .milliseconds(1400)])
    timer.cancel()
    manual.advance(by: .seconds(10))
    #expect(beats.withLock { $0.count } == 2)
    // The wall clock moves with the advances (12 s in all), and only with them.
    let moved = manual.wallSeconds - wallStart
    #expect(abs(moved - 12) < 0.001, "the wall clock moved \(moved) s")
    #expect(manual.sleeperCount == 0)

    let cancelled = Task { try await clock.sleep(for: .seconds(1)) }
    await manual.waitForSleepers(1)
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(manual.sleeperCount == 0)
  }

  @Test func aLeaseIsRenewedEveryThirdAndLapsesAtItsExpiry() throws {
    let manual = ManualClock()
    let start = manual.now
    let container = try SharedContainer(directory: directory.path, clock: manual.clock)
    let presence = try container.presence("sync")
    let lease = try presence.lease(for: .seconds(30))
    #expect(try presence.holder?.leaseExpiry == (start + .seconds(30)).nanoseconds)
    // Counted on the container's clock, as of the holder's reading.
    #expect(try presence.holder?.leaseRemaining == .seconds(30))

    // The heartbeat renews every third of the lease, each renewal for a whole lease from then.
    manual.advance(by: .seconds(10) - .nanoseconds(1))
    #expect(try presence.holder?.leaseExpiry == (start + .seconds(30)).nanoseconds)
    #expect(try presence.holder?.leaseRemaining == .seconds(20) + .nanoseconds(1))
    manual.advance(by: .nanoseconds(1))
    #expect(try presence.holder?.leaseExpiry == (start + .seconds(40)).nanoseconds)
    manual.advance(by: .seconds(20))
    #expect(try presence.holder?.leaseExpiry == (start + .seconds(60)).nanoseconds)
    #expect(lease.isHeld)

    // Suspended (as iOS suspends a process): no renewal, and the lease lapses at its expiry,
    // not a nanosecond before.
    container.suspend()
    manual.advance(by: .seconds(30) - .nanoseconds(1))
    #expect(lease.isHeld)
    #expect(try presence.isActive)
    manual.advance(by: .nanoseconds(1))
    #expect(!lease.isHeld)
    #expect(try !presence.isActive)
    #expect(try presence.holder == nil)

    // Resumed: renewed at once, for a whole lease.
    try container.resume()
    #expect(lease.isHeld)
    #expect(try presence.holder?.leaseExpiry == (start + .seconds(90)).nanoseconds)
    lease.release()
    #expect(manual.sleeperCount == 0)  // the heartbeat stopped
  }
}
