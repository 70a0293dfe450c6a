#if Postgres
  import Liaison
  import PostgresNIO

  /// A connection whose session holds something (an advisory lock, a claim): nobody else uses it,
  /// and it is watched so that its holder learns when the hold is lost.
  ///
  /// The connection is lost when the server closes it (a restart, `pg_terminate_backend`) — seen
  /// at once — or stops answering a heartbeat (a cut network, a dead server host) — seen within
  /// ``DetectionTiming/holderNotices``, before the server ends the session and lets another
  /// process in. Lost or released, the connection is closed, never reused: a session that may
  /// still hold the lock must not serve anyone else.
  final class HeldSession: Sendable {
    private struct State: Sendable {
      var connection: PostgresConnection?
      var monitor: Task<Void, Never>?
      var end = LossState()
      /// Told once, when the hold ends (lost or released).
      var onEnd: [@Sendable () -> Void] = []
      /// Whether the server has answered a statement of the session sent after the one that
      /// took the hold (``markAnswered()``).
      var answered = false
      /// How many statements run on the connection now (``running(_:)``).
      var statements = 0
      /// Whether a heartbeat runs now, and the statements that wait for its end to start.
      var beating = false
      var afterBeat: [CheckedContinuation<Void, Never>] = []
    }

    let connector: Connector
    private let state: Locked<State>
    private let what: String

    init(connection: PostgresConnection, connector: Connector, what: String) {
      self.connector = connector
      self.what = what
      state = Locked(State(connection: connection))
      let interval = connector.timing.heartbeatInterval
      // A background task of the container: its close() ends it.
      let monitor = connector.background.start { [weak self] in
        while !Task.isCancelled {
          do {
            try await connector.clock.sleep(for: interval)
          } catch {
            return
          }
          guard let self else { return }
          if !(await self.heartbeat()) { return }
        }
      }
      state.withLock { $0.monitor = monitor }
      connector.watch(connection, for: self)
    }

    /// A hold dropped while held is released in the background: its connection is closed, which
    /// ends its session on the server (the container's `close()` waits for that close).
    deinit {
      let (connection, monitor, onEnd) = state.withLock { ($0.connection.take(), $0.monitor.take(), $0.onEnd) }
      monitor?.cancel()
      for action in onEnd { action() }
      if let connection {
        connector.stopWatching(connection)
        connector.close(connection)
      }
    }

    var isHeld: Bool { state.withLock { $0.connection != nil } }
    var loss: LiaisonError? { state.withLock { $0.end.loss } }

    /// Waits until the hold is lost and returns why; `nil` once released.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled while it is
    ///   still held.
    func waitForLoss() async throws(LiaisonError) -> LiaisonError? {
      let loss = await state.waitForLoss(\.end)
      if loss == nil, Task.isCancelled, isHeld {
        throw LiaisonError.cancelled("waiting for the loss of \(what.prefix(1).lowercased() + what.dropFirst())")
      }
      return loss
    }

    /// Runs `action` once the hold ends, lost or released (at once if it has ended already).
    func whenEnded(_ action: @escaping @Sendable () -> Void) {
      let ended = state.withLock { state -> Bool in
        guard state.connection != nil else { return true }
        state.onEnd.append(action)
        return false
      }
      if ended { action() }
    }

    /// The connection, while held.
    var connection: PostgresConnection? { state.withLock { $0.connection } }

    /// Whether the server has answered a statement of the session sent after the one that took
    /// the hold (a heartbeat, a statement run under it, the release): the server runs a statement
    /// only once the previous one's implicit transaction has finished committing, so the
    /// commit of the statement that took the hold has finished (flushed, and replicated as its
    /// `synchronous_commit` asks). postgres-nio sends a statement only after the previous one's
    /// `ReadyForQuery`, which the server sends after that commit.
    var isAnswered: Bool { state.withLock { $0.answered } }

    /// Records that the server answered a statement of the session (see ``isAnswered``).
    func markAnswered() {
      state.withLock { $0.answered = true }
    }

    /// The descriptor of the connection's socket in this process, while held.
    var socketDescriptor: CInt? { connection.flatMap(connector.socketDescriptor(of:)) }

    /// Stops watching the hold, and leaves its connection open for this process's exit to close
    /// (it is never closed here, so no `Terminate` message ends the session): once this process
    /// has passed the socket on to a command, the server ends the session, and so the hold, only
    /// when every process holding the socket has ended, as the kernel does with a `flock` whose
    /// descriptor a command inherited.
    func leaveOpenUntilExit() {
      let (connection, monitor) = state.withLock { ($0.connection.take(), $0.monitor.take()) }
      monitor?.cancel()
      guard let connection else { return }
      connector.stopWatching(connection)
      connector.leaveOpen(connection)
      Self.leftOpen.withLock { $0.append(connection) }
    }

    /// The connections left open until this process exits.
    private static let leftOpen = Locked<[PostgresConnection]>([])

    /// Runs `statement` on the session's connection, never beside a heartbeat. A statement may
    /// wait for as long as another process holds the rows it needs (an acknowledgement behind
    /// another writer's row lock); a heartbeat sent meanwhile would wait behind it on the
    /// connection with its reply bound running, and end the hold for the statement's wait. So no
    /// heartbeat is sent while a statement runs (the connection's keepalives watch the server
    /// then, within the detection bound), and a statement that comes while one is on its way
    /// waits for its answer (within the reply bound) before it is sent.
    func running<T: Sendable>(_ statement: () async throws -> T) async throws -> T {
      await withCheckedContinuation { (afterBeat: CheckedContinuation<Void, Never>) in
        let waits = state.withLock { state -> Bool in
          state.statements += 1
          if state.beating { state.afterBeat.append(afterBeat) }
          return state.beating
        }
        if !waits { afterBeat.resume() }
      }
      defer { state.withLock { $0.statements -= 1 } }
      return try await statement()
    }

    /// One heartbeat; `false` once the hold has ended. None while a statement runs on the
    /// connection (``running(_:)``).
    private func heartbeat() async -> Bool {
      guard let connection else { return false }
      let beats = state.withLock { state -> Bool in
        guard state.statements == 0 else { return false }
        state.beating = true
        return true
      }
      guard beats else { return true }
      defer {
        let waiting = state.withLock { state in
          state.beating = false
          defer { state.afterBeat = [] }
          return state.afterBeat
        }
        for statement in waiting { statement.resume() }
      }
      let connector = connector
      do {
        // In a task of its own, awaited here: the monitor is cancelled when the hold ends (an
        // unlock, a release, a hand-over to a command), and a cancelled statement closes its
        // connection, which would end a session just handed on, or put a closing connection
        // back among the idle ones for the next statement to fail on.
        let rows = try await Task {
          try await Connector.run(
            "SELECT pg_backend_pid()", on: connection, within: connector.timing.replyTimeout,
            logger: connector.quietLogger)
        }.value
        do {
          try connector.checkSession(of: connection, ranIn: try rows.first!.decode(Int32.self))
        } catch {
          lose(
            "its connection's statements ran in another server session (the server at this address hands sessions "
              + "to other clients between transactions: a pooler in transaction mode; add pool_mode=transaction to "
              + "the URL, or connect to the server directly)")
          return false
        }
        markAnswered()
        return true
      } catch {
        lose("its connection to the server stopped answering (a cut network, or a server host that died)")
        return false
      }
    }

    /// Ends the hold as lost, closing the connection.
    func lose(_ reason: String) {
      let loss = LiaisonError(
        .lost,
        "\(what) was lost: \(reason). Another process may hold it now; stop what you do under it, and take it again.")
      end(loss)
    }

    /// Ends the hold: lost when `loss` is given, released otherwise. Returns the connection if it
    /// was still held (for a release to unlock and reuse), after the monitor has stopped.
    @discardableResult
    func end(_ loss: LiaisonError?) -> PostgresConnection? {
      let (connection, monitor, waiters, onEnd) = state.withLock { state in
        let onEnd = state.onEnd
        state.onEnd = []
        return (state.connection.take(), state.monitor.take(), state.end.end(loss), onEnd)
      }
      monitor?.cancel()
      waiters.resumeAll(loss)
      for action in onEnd { action() }
      if let connection { connector.stopWatching(connection) }
      if loss != nil, let connection {
        connector.close(connection)
        return nil
      }
      return connection
    }
  }
#endif
