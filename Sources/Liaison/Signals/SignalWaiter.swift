/// A subscription to a signal that tasks wait on again and again, for as long as it lives: the
/// store's receivers keep one instead of subscribing before every wait (each subscription can
/// start and end the process's event-loop thread).
///
/// A post that arrives while nobody waits is remembered (once), so that a wait that starts after
/// it returns at once: check for work, then ``wait()``, and no post is missed in between.
package final class SignalWaiter: Sendable {
  private struct State {
    var rung = false
    var closed = false
    var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    var cancelled: Set<UInt64> = []
    var nextID: UInt64 = 0
  }

  private let state = Locked(State())
  private let subscription = Locked<SignalNotifications.Subscription?>(nil)
  /// The clock of a timed wait's deadline.
  private let clock: LiaisonClock

  /// A waiter on `signal`, whose timed waits end on `clock` (the container's).
  package init(_ signal: Signal, clock: LiaisonClock = .system) throws(LiaisonError) {
    self.clock = clock
    let file = signal.file
    let id = try SignalHub.shared.subscribe(file, ignoringOwnPosts: false) { [state] _ in
      let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
        guard !state.waiters.isEmpty else {
          state.rung = true
          return []
        }
        defer { state.waiters.removeAll() }
        return Array(state.waiters.values)
      }
      for waiter in waiters { waiter.resume() }
    }
    subscription.withLock { $0 = .init(key: file.key, id: id) }
  }

  deinit { close() }

  /// How many waits are suspended now, for a post, a deadline, a cancellation or ``close()``.
  package var waitingCount: Int { state.withLock { $0.waiters.count } }

  /// Waits for a post made since the previous wait returned (or since this waiter was made).
  ///
  /// - Returns: `false` when the task was cancelled or the waiter closed.
  package func wait() async -> Bool {
    await wait(until: nil) != .ended
  }

  /// How a timed wait ended.
  package enum Outcome: Sendable {
    /// A post came.
    case posted
    /// The deadline passed first.
    case timedOut
    /// The task was cancelled, or the waiter closed.
    case ended
  }

  /// Waits for a post made since the previous wait returned, at most until `deadline` (`nil`: no
  /// deadline).
  package func wait(until deadline: LiaisonClock.Instant?) async -> Outcome {
    let id = state.withLock { state in
      state.nextID += 1
      return state.nextID
    }
    // The deadline ends the wait as a cancellation would, and is remembered as the reason.
    let timedOut = Locked(false)
    // Owned by the wait: cancelled before it returns (not awaited: the timer is a task of the
    // cooperative pool, which a waiter on an executor of its own must not wait for).
    let timer = deadline.map { [state, clock] deadline in
      Task {
        guard (try? await clock.sleep(until: deadline)) != nil else { return }
        let waiter = state.withLock { state in
          guard let waiter = state.waiters.removeValue(forKey: id) else {
            state.cancelled.insert(id)
            return nil as CheckedContinuation<Void, Never>?
          }
          return waiter
        }
        timedOut.withLock { $0 = true }
        waiter?.resume()
      }
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let now = state.withLock { state -> Bool in
          if state.rung || state.closed || state.cancelled.remove(id) != nil {
            state.rung = false
            return true
          }
          state.waiters[id] = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock { state in
        guard let waiter = state.waiters.removeValue(forKey: id) else {
          state.cancelled.insert(id)  // not waiting yet: the wait returns as soon as it starts
          return nil as CheckedContinuation<Void, Never>?
        }
        return waiter
      }
      waiter?.resume()
    }
    timer?.cancel()
    state.withLock { _ = $0.cancelled.remove(id) }
    if Task.isCancelled || state.withLock({ $0.closed }) { return .ended }
    return timedOut.withLock { $0 } ? .timedOut : .posted
  }

  /// Ends the subscription; waits in progress return `false`.
  package func close() {
    subscription.withLock { $0.take() }?.cancel()
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.closed = true
      defer { state.waiters.removeAll() }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
  }
}
