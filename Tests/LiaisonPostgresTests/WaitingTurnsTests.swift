#if Postgres
  import Liaison
  import LiaisonTestSupport
  import Testing

  @testable import LiaisonPostgres

  /// The turns of a process's waiters for a lock, on a manual clock: a wait ends at its deadline,
  /// not before, and a turn given before it is taken. No server, no sleep.
  @Suite("Waiting turns on a manual clock")
  struct WaitingTurnsTests {
    @Test func aWaitEndsAtItsDeadlineAndATurnGivenBeforeItIsTaken() async throws {
      let manual = ManualClock()
      let turns = WaitingTurns(clock: manual.clock)
      let key = try LiaisonName("refresh")
      #expect(try await !turns.take(key, until: nil))  // free: taken at once

      // A second waiter with a deadline 5 s away times out at 5 s, not before.
      let deadline = manual.now + .seconds(5)
      let late = Task { try await turns.take(key, until: deadline) }
      await manual.waitForSleepers(1)
      #expect(turns.waitingCount(key) == 1)
      manual.advance(by: .seconds(5) - .nanoseconds(1))
      #expect(turns.waitingCount(key) == 1)
      manual.advance(by: .nanoseconds(1))
      await #expect(throws: WaitingTurns.Ending.timedOut) { try await late.value }
      #expect(turns.waitingCount(key) == 0)

      // A third, given the turn before its deadline: it has waited, and its timer is gone.
      let next = Task { try await turns.take(key, until: manual.now + .seconds(5)) }
      await manual.waitForSleepers(1)
      turns.give(key)
      #expect(try await next.value)
      #expect(manual.sleeperCount == 0)
      manual.advance(by: .seconds(10))  // its deadline passes: nothing happens
      turns.give(key)
      #expect(turns.waitingCount(key) == 0)
      #expect(try await !turns.take(key, until: manual.now))  // free again
      turns.give(key)
    }
  }
#endif
