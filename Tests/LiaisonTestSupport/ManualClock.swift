import Liaison

/// A clock that moves only when the test moves it (``advance(by:)``), for the logic of leases,
/// heartbeats, trust windows, turns and rests, tested without waiting: give `clock` to the place
/// under test (`SharedContainer(directory:clock:)`), wait for the code to reach its sleep
/// (``waitForSleepers(_:)``), then advance.
///
/// Deterministic: an advance wakes the sleepers and fires the timers whose deadlines it passes,
/// in the order of their deadlines (of equal deadlines, in the order they were set), each at its
/// own moment (``now`` reads the deadline while its handler runs). A woken task runs on its own
/// afterwards: wait for what it does as for any task's work, by a condition, never a sleep.
///
/// It starts at the system clock's present (so that a lease record it dates looks sane to any
/// reader), unless given a start; its wall clock (``wallSeconds``) starts at the system's and
/// moves with its advances.
package final class ManualClock: LiaisonClockSource, Sendable {
  private struct Sleeper: Sendable {
    let id: Int
    var deadline: LiaisonClock.Instant
    /// A sleeping task's continuation, or a repeating timer's handler and interval.
    let continuation: CheckedContinuation<Void, any Error>?
    let timer: (handler: @Sendable () -> Void, interval: Duration)?
  }

  private struct State: Sendable {
    var now: LiaisonClock.Instant
    var sleepers: [Sleeper] = []
    var nextID = 0
    /// What waits for a number of sleepers (``waitForSleepers(_:)``).
    var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  private let state: Locked<State>
  private let start: LiaisonClock.Instant
  private let wallStart: Double

  /// A manual clock at `start` (by default, the system clock's present), its wall clock at
  /// `wallStart` (by default, the system's).
  package init(
    start: LiaisonClock.Instant = LiaisonClock.system.now, wallStart: Double = LiaisonClock.system.wallSeconds
  ) {
    state = Locked(State(now: start))
    self.start = start
    self.wallStart = wallStart
  }

  /// The clock to give a place.
  package var clock: LiaisonClock { LiaisonClock(self) }

  package var now: LiaisonClock.Instant { state.withLock { $0.now } }

  /// The wall clock's start, moved as far as ``now`` has moved.
  package var wallSeconds: Double {
    let (seconds, attoseconds) = start.duration(to: now).components
    return wallStart + Double(seconds) + Double(attoseconds) / 1e18
  }

  /// How many tasks sleep and timers run on this clock now.
  package var sleeperCount: Int { state.withLock { $0.sleepers.count } }

  /// The earliest deadline of a sleeper or timer, if any.
  package var nextDeadline: LiaisonClock.Instant? { state.withLock { $0.sleepers.map(\.deadline).min() } }

  package func sleep(until deadline: LiaisonClock.Instant) async throws {
    let id = state.withLock { state -> Int in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let (due, watchers) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
          if Task.isCancelled || deadline <= state.now { return (true, []) }
          state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation, timer: nil))
          return (false, Self.satisfiedWatchers(&state))
        }
        if due {
          if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
        }
        for watcher in watchers { watcher.resume() }
      }
    } onCancel: {
      let sleeper = state.withLock { state -> Sleeper? in
        guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
        return state.sleepers.remove(at: index)
      }
      sleeper?.continuation?.resume(throwing: CancellationError())
    }
  }

  package func repeating(
    every interval: Duration, _ handler: @escaping @Sendable () -> Void
  ) -> any LiaisonClockTimer {
    let (id, watchers) = state.withLock { state -> (Int, [CheckedContinuation<Void, Never>]) in
      state.nextID += 1
      state.sleepers.append(
        Sleeper(id: state.nextID, deadline: state.now + interval, continuation: nil, timer: (handler, interval)))
      return (state.nextID, Self.satisfiedWatchers(&state))
    }
    for watcher in watchers { watcher.resume() }
    return Timer(clock: self, id: id)
  }

  private struct Timer: LiaisonClockTimer {
    let clock: ManualClock
    let id: Int
    func cancel() { clock.state.withLock { $0.sleepers.removeAll { $0.id == id } } }
  }

  /// Moves the clock `duration` on: wakes every sleeper and fires every timer whose deadline it
  /// passes, in deadline order, each with ``now`` at its deadline; then leaves ``now`` at the end.
  package func advance(by duration: Duration) {
    let end = now + duration
    while true {
      let due = state.withLock { state -> Sleeper? in
        guard
          let index = state.sleepers.indices.filter({ state.sleepers[$0].deadline <= end })
            .min(by: { state.sleepers[$0].deadline < state.sleepers[$1].deadline })
        else {
          state.now = max(state.now, end)
          return nil
        }
        var sleeper = state.sleepers[index]
        state.now = max(state.now, sleeper.deadline)
        if let timer = sleeper.timer {
          sleeper.deadline = sleeper.deadline + timer.interval
          state.sleepers[index] = sleeper  // rescheduled before it fires, so that it may cancel itself
          // Moved to the end, so that equal deadlines keep the order they were set in.
          state.sleepers.append(state.sleepers.remove(at: index))
        } else {
          state.sleepers.remove(at: index)
        }
        return sleeper
      }
      guard let due else { return }
      due.continuation?.resume()
      due.timer?.handler()
    }
  }

  /// Returns once at least `count` tasks sleep or timers run on this clock: the code under test
  /// has reached its wait.
  package func waitForSleepers(_ count: Int = 1) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let now = state.withLock { state -> Bool in
        if state.sleepers.count >= count { return true }
        state.watchers.append((count, continuation))
        return false
      }
      if now { continuation.resume() }
    }
  }

  private static func satisfiedWatchers(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
    let count = state.sleepers.count
    let ready = state.watchers.filter { $0.count <= count }.map(\.continuation)
    state.watchers.removeAll { $0.count <= count }
    return ready
  }
}
