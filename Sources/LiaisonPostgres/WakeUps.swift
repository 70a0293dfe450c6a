#if Postgres
  import Liaison

  /// "Something may have changed; look again", for any number of waiting tasks: a counter that
  /// every ring increments. A task reads ``count`` before it looks, then waits for a ring after
  /// that count: a ring between its look and its wait returns the wait at once, so no ring is
  /// ever missed.
  final class WakeUps: Sendable {
    private struct State: Sendable {
      var count: UInt64 = 0
      var closed = false
      var waiters: [(number: Int, waiter: CheckedContinuation<Bool, Never>)] = []
      var nextWaiter = 0
    }

    private let state = Locked(State())

    /// How many rings so far.
    var count: UInt64 { state.withLock { $0.count } }

    /// Wakes every waiting task.
    func ring() {
      let waiters = state.withLock { state in
        state.count += 1
        defer { state.waiters = [] }
        return state.waiters
      }
      for (_, waiter) in waiters { waiter.resume(returning: true) }
    }

    /// Ends every wait, now and later: they return `false`.
    func close() {
      let waiters = state.withLock { state in
        state.closed = true
        defer { state.waiters = [] }
        return state.waiters
      }
      for (_, waiter) in waiters { waiter.resume(returning: false) }
    }

    /// Waits for a ring after the `seen`-th: `true` once there is one, `false` when closed or
    /// when the task is cancelled.
    func wait(after seen: UInt64) async -> Bool {
      let cancelled = -1
      let number = Locked<Int?>(nil)
      return await withTaskCancellationHandler {
        await withCheckedContinuation { (waiter: CheckedContinuation<Bool, Never>) in
          let immediate = state.withLock { state -> Bool? in
            if state.closed { return false }
            if state.count > seen { return true }
            return number.withLock { number -> Bool? in
              guard number != cancelled else { return false }
              state.nextWaiter += 1
              state.waiters.append((state.nextWaiter, waiter))
              number = state.nextWaiter
              return nil
            }
          }
          if let immediate { waiter.resume(returning: immediate) }
        }
      } onCancel: {
        let added = number.withLock { number -> Int? in
          defer { if number == nil { number = cancelled } }
          return number
        }
        guard let added else { return }
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
          guard let index = state.waiters.firstIndex(where: { $0.number == added }) else { return nil }
          return state.waiters.remove(at: index).waiter
        }
        waiter?.resume(returning: false)
      }
    }
  }
#endif
