#if Postgres
  import Liaison

  /// The turns of one process's waiters for a container's locks: of the tasks that wait for the
  /// same lock, one at a time waits on the server (with a connection of its own), and the others
  /// wait here, first come first served, without a connection. 200 tasks waiting for one lock
  /// cost two connections (the holder's and the one waiting), not 200, and the hand-over is the
  /// server's as before: the waiting connection is granted the lock as soon as the holder lets
  /// go, and the next task starts its wait on the server then.
  final class WaitingTurns: Sendable {
    private struct Waiter: Sendable {
      let id: Int
      let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Queue: Sendable {
      var taken = false
      var waiters: [Waiter] = []
    }

    private struct State: Sendable {
      var queues: [LiaisonName: Queue] = [:]
      /// The timers that end waits at their deadlines, by waiter; cancelled when the wait ends
      /// (the turn came, the deadline passed, or the task was cancelled). Not awaited: a timer is
      /// a task of the cooperative pool, and a hand-over must not wait for a thread of a pool that
      /// other work keeps busy (200 waiters on their own executor timed out so, one by one).
      var timers: [Int: Task<Void, Never>] = [:]
      var nextID = 0
    }

    private let state = Locked(State())
    /// The clock of the waits' deadlines (a manual one in the tests).
    private let clock: LiaisonClock

    init(clock: LiaisonClock = .system) { self.clock = clock }

    /// Why a wait for a turn ended without it.
    enum Ending: Error {
      case timedOut, cancelled
    }

    /// Waits for the turn of `key`'s waiters, until `deadline` at the latest (`nil`: as long as it
    /// takes). Every turn taken is given back with ``give(_:)``.
    ///
    /// - Returns: whether the task waited for its turn (`false`: it was free).
    /// - Throws: ``Ending/timedOut`` at the deadline, ``Ending/cancelled`` when the task is
    ///   cancelled; the turn is not taken then.
    @discardableResult
    func take(_ key: LiaisonName, until deadline: LiaisonClock.Instant?) async throws(Ending) -> Bool {
      var waited = false
      let id = state.withLock { state -> Int in
        state.nextID += 1
        return state.nextID
      }
      // The wait owns its timer: cancelled, and forgotten, before it returns or throws.
      defer { state.withLock { _ = $0.timers.removeValue(forKey: id) } }
      var ending: Ending?
      do {
        try await withTaskCancellationHandler {
          try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let now = state.withLock { state -> Bool in
              var queue = state.queues[key] ?? Queue()
              defer { state.queues[key] = queue }
              guard queue.taken else {
                queue.taken = true
                return true
              }
              queue.waiters.append(Waiter(id: id, continuation: continuation))
              return false
            }
            if now {
              continuation.resume()
              return
            }
            waited = true
            // Queued first, so that a timer that fires at once (a deadline already passed) finds
            // the waiter to end.
            if let deadline {
              let timer = Task { [weak self, clock] in
                guard (try? await clock.sleep(until: deadline)) != nil else { return }
                self?.end(id, of: key, with: .timedOut)
              }
              let queued = state.withLock { state -> Bool in
                state.timers[id] = timer
                return state.queues[key]?.waiters.contains(where: { $0.id == id }) == true
              }
              if !queued { timer.cancel() }  // its turn came, or it ended, meanwhile
            }
            if Task.isCancelled {
              end(id, of: key, with: .cancelled)  // cancelled before the handler could see the waiter
            }
          }
        } onCancel: {
          end(id, of: key, with: .cancelled)
        }
      } catch let caught as Ending {
        ending = caught
      } catch {
        ending = .cancelled
      }
      state.withLock { $0.timers[id] }?.cancel()
      if let ending { throw ending }
      return waited
    }

    /// Gives the turn of `key` to the next waiter, if any.
    func give(_ key: LiaisonName) {
      let (next, timer) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
        guard var queue = state.queues[key] else { return (nil, nil) }
        guard !queue.waiters.isEmpty else {
          state.queues[key] = nil
          return (nil, nil)
        }
        let next = queue.waiters.removeFirst()
        state.queues[key] = queue  // still taken: by the next waiter
        return (next, state.timers[next.id])
      }
      timer?.cancel()
      next?.continuation.resume()
    }

    /// How many tasks wait for `key`'s turn now (the one that has it not counted).
    func waitingCount(_ key: LiaisonName) -> Int { state.withLock { $0.queues[key]?.waiters.count ?? 0 } }

    /// Ends the wait of the waiter `id` with `ending`, if it still waits.
    private func end(_ id: Int, of key: LiaisonName, with ending: Ending) {
      let (waiter, timer) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
        guard let index = state.queues[key]?.waiters.firstIndex(where: { $0.id == id }) else { return (nil, nil) }
        return (state.queues[key]?.waiters.remove(at: index), state.timers[id])
      }
      timer?.cancel()
      waiter?.continuation.resume(throwing: ending)
    }
  }
#endif
