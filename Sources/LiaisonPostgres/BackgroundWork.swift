#if Postgres
  import Liaison

  /// The tasks a ``PostgresContainer`` runs in the background (its listening connection, the
  /// heartbeats of held locks and claims, the watches of presences, a cancelled wait's cancel on
  /// the server): each one is tracked here from its start to its end, so that
  /// ``PostgresContainer/close()`` cancels them and waits until every one has ended. No task of
  /// the container is left running with nothing to own it.
  final class BackgroundWork: Sendable {
    private struct State: Sendable {
      var tasks: [Int: Task<Void, Never>] = [:]
      var nextID = 0
      var closed = false
    }

    private let state = Locked(State())

    /// Runs `work` in a task tracked until it ends, and returns it (to cancel it sooner); `nil`,
    /// running nothing, once ``close()`` has begun.
    @discardableResult
    func start(_ work: @escaping @Sendable () async -> Void) -> Task<Void, Never>? {
      state.withLock { state -> Task<Void, Never>? in
        guard !state.closed else { return nil }
        state.nextID += 1
        let id = state.nextID
        let task = Task { [state = self.state] in
          await work()
          state.withLock { _ = $0.tasks.removeValue(forKey: id) }
        }
        state.tasks[id] = task
        return task
      }
    }

    /// How many tasks run now.
    var count: Int { state.withLock { $0.tasks.count } }

    /// Refuses new work, cancels every task and waits until each has ended.
    func close() async {
      let tasks = state.withLock { state in
        state.closed = true
        return Array(state.tasks.values)
      }
      for task in tasks { task.cancel() }
      for task in tasks { await task.value }
    }
  }
#endif
