#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// A lock shared by processes on any number of hosts: a PostgreSQL session-level advisory
  /// lock, held on a connection of its own. Same operations and meaning as ``/Liaison/ProcessLock``:
  /// exclusive or shared, `tryLock`, `lock(timeout:)`, `withLock` (from ``/Liaison/CoordinationLock``).
  ///
  /// The server releases the lock when the holder's session ends: at once when the holder's
  /// process dies or closes its connection, within the container's detection bound when its
  /// host dies or its network is cut. The holder learns of such a loss through
  /// ``PostgresLockGuard/loss`` and ``PostgresLockGuard/waitForLoss()``, and `withLock` cancels
  /// its body. Every exclusive grant carries a fencing token
  /// (``PostgresLockGuard/fencingToken()``), given in the same transaction as the lock.
  ///
  /// Costs: `tryLock` and an uncontended `lock` are one round trip (and one commit, for the
  /// token, when exclusive); `unlock` is one more. The first ``PostgresLockGuard/fencingToken()``
  /// may add one, which confirms the token's commit.
  public final class PostgresLock: Sendable, CoordinationLock {
    /// The lock's name.
    public let name: LiaisonName
    let container: PostgresContainer
    /// The lock's row id (the second key of its advisory lock), once known.
    private let rowID: RowID

    init(container: PostgresContainer, name: LiaisonName) {
      self.container = container
      self.name = name
      rowID = RowID(.lock, name: name, in: container)
    }

    /// Takes the lock if it is free, without waiting; `nil` when another holder has it.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func tryLock(_ mode: LockMode = .exclusive) async throws(LiaisonError) -> PostgresLockGuard? {
      let id = try await resolveID()
      let connector = container.connector
      if connector.holdsAreLeases { return try await tryLease(mode, id: id) }
      let connection = try await connector.take()
      let token: UInt64?
      do {
        token = try await grantInSession(mode, id: id, wait: false, on: connection)
      } catch {
        connector.close(connection)  // its session may hold the lock
        throw PostgresErrors.translate(error, doing: "take the lock '\(name)'")
      }
      guard let token else {
        connector.giveBack(connection)
        return nil
      }
      return PostgresLockGuard(lock: self, id: id, mode: mode, token: token, connection: connection)
    }

    /// Takes the lock as a lease if it is free (``HeldLease``); `nil` when another holder has it.
    private func tryLease(_ mode: LockMode, id: Int32) async throws(LiaisonError) -> PostgresLockGuard? {
      let connector = container.connector
      let kind = HeldLease.Kind.lock(id: id, mode: mode)
      let taken = try await HeldLease.take(
        kind, connector: connector, doing: "take the lock '\(name)'", committing: mode == .exclusive
      ) { holder in
        HeldLease.take(lock: id, mode: mode, holder: holder, length: connector.timing.leaseLength)
      }
      guard let (holder, sent, row) = taken else { return nil }
      let token: UInt64
      do {
        token = UInt64(bitPattern: try row.decode(Int64.self))
      } catch {
        HeldLease.releaseInBackground(kind, holder: holder, connector: connector)
        throw PostgresErrors.translate(error, doing: "take the lock '\(name)'")
      }
      let lease = HeldLease(kind: kind, holder: holder, sent: sent, connector: connector, what: "The lock '\(name)'")
      return PostgresLockGuard(lock: self, id: id, mode: mode, token: token, lease: lease)
    }

    /// Takes the lock, waiting at most `timeout` (`nil`: as long as it takes). The wait is the
    /// server's: a waiter is granted the lock as soon as the holder's session ends.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when the timeout passes first,
    ///   ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled while waiting (the
    ///   wait is cancelled on the server too), ``/Liaison/LiaisonError/Code/unavailable`` when the
    ///   server cannot be reached.
    public func lock(_ mode: LockMode = .exclusive, timeout: Duration? = nil) async throws(LiaisonError)
      -> PostgresLockGuard
    {
      try ProcessLock.check(timeout)
      do {
        return try await takeOrWait(mode, timeout: timeout)
      } catch {
        // postgres-nio ends a query of a cancelled task by closing its connection, which would
        // read as a lost server: cancelled at any point, the wait reports the cancellation.
        if Task.isCancelled && error.code != .cancelled { throw .cancelled("waiting for the lock '\(name)'") }
        throw PostgresErrors.translate(error, doing: "wait for the lock '\(name)'")
      }
    }

    /// Takes the lock, or waits for it on the server; of this process's tasks that wait for
    /// the lock, one at a time waits on the server, with a connection of its own, and the others
    /// wait for their turn without one (``WaitingTurns``).
    private func takeOrWait(_ mode: LockMode, timeout: Duration?) async throws(LiaisonError) -> PostgresLockGuard {
      if timeout == .zero {
        if let held = try await tryLock(mode) { return held }
        throw timedOut(timeout)
      }
      let deadline = timeout.map { container.connector.clock.now + $0 }
      let turns = container.lockTurns
      let waitedForTurn: Bool
      do {
        waitedForTurn = try await turns.take(name, until: deadline)
      } catch {
        switch error {
        case .timedOut: throw timedOut(timeout)
        case .cancelled: throw .cancelled("waiting for the lock '\(name)'")
        }
      }
      defer { turns.give(name) }
      if container.connector.holdsAreLeases { return try await waitForLease(mode, until: deadline, timeout: timeout) }
      if let held = try await tryLock(mode) { return held }
      if Task.isCancelled { throw .cancelled("waiting for the lock '\(name)'") }
      // What is left of the timeout after a wait for the turn (the whole timeout when the turn
      // was free: the time this process took to get here is not waiting); lock_timeout bounds
      // the wait on the server with it (0 waits as long as it takes).
      let left = waitedForTurn ? deadline.map { $0 - container.connector.clock.now } : timeout
      if let left, left <= .zero { throw timedOut(timeout) }
      let milliseconds = left.map { max(1, Int(clamping: $0.clampedNanoseconds / 1_000_000)) } ?? 0
      let id = try await resolveID()
      let connector = container.connector
      let connection = try await connector.take()
      let granted: UInt64?
      do {
        let prepared = try await Connector.run(
          "SELECT pg_backend_pid(), set_config('lock_timeout', \(String(milliseconds)), false)", on: connection,
          within: connector.timing.replyTimeout, logger: connector.quietLogger)
        let backend = try prepared.first!.decode((Int32, String).self, context: .default).0
        let token = try await withTaskCancellationHandler {
          try await grantInSession(mode, id: id, wait: true, on: connection)
        } onCancel: {
          // Cancels the wait on the server, in the container's background work. Should it arrive
          // after the grant, it finds the session idle (or cancels the next statement): the check
          // below releases the lock.
          connector.background.start {
            do {
              _ = try await connector.query("SELECT pg_cancel_backend(\(backend))", doing: "cancel a lock wait")
            } catch {
              connector.logger.warning("Could not cancel a lock wait on the server: \(error)")
            }
          }
        }
        if Task.isCancelled {
          connector.close(connection)
          throw LiaisonError.cancelled("waiting for the lock '\(name)'")
        }
        granted = token
      } catch {
        connector.close(connection)
        switch PostgresErrors.sqlState(error) {
        case PostgresErrors.lockNotAvailable: throw timedOut(timeout)  // lock_timeout passed
        case "57014" where Task.isCancelled: throw .cancelled("waiting for the lock '\(name)'")  // query_canceled
        default: throw PostgresErrors.translate(error, doing: "wait for the lock '\(name)'")
        }
      }
      guard let granted else {
        // A lease holds it (a process through a pooler in transaction mode): wait for its end.
        // The connection's session has this wait's lock_timeout: not reused.
        connector.close(connection)
        return try await waitForLease(mode, until: deadline, timeout: timeout)
      }
      return PostgresLockGuard(lock: self, id: id, mode: mode, token: granted, connection: connection)
    }

    /// Takes the lock once it is free, trying every ``Listener/pollInterval`` until `deadline`:
    /// the wait of a lease (nothing on the server can be waited on through a pooler in
    /// transaction mode), and of a session that finds a lease holding the lock.
    private func waitForLease(_ mode: LockMode, until deadline: LiaisonClock.Instant?, timeout: Duration?)
      async throws(LiaisonError) -> PostgresLockGuard
    {
      while true {
        if let held = try await tryLock(mode) { return held }
        if Task.isCancelled { throw .cancelled("waiting for the lock '\(name)'") }
        let clock = container.connector.clock
        let pause = deadline.map { min(Listener.pollInterval, $0 - clock.now) } ?? Listener.pollInterval
        guard pause > .zero else { throw timedOut(timeout) }
        do {
          try await clock.sleep(for: pause)
        } catch {
          throw .cancelled("waiting for the lock '\(name)'")
        }
      }
    }

    private func timedOut(_ timeout: Duration?) -> LiaisonError {
      LiaisonError(
        .timedOut,
        "Timed out after \(timeout.map { "\($0)" } ?? "waiting") for the lock '\(name)' in the PostgreSQL namespace "
          + "'\(container.namespace)'; another holder still has it. Try again later, or wait longer.")
    }

    /// Takes the lock in `connection`'s session, waiting on the server when `wait` is set: its
    /// fencing token (0 for a shared grant), or `nil` when another holder has it. A lease (a
    /// process through a pooler in transaction mode) excludes a session too: a session that
    /// gets the advisory lock while a lease holds the lock lets it go again and returns `nil`.
    ///
    /// An exclusive grant adds one to the lock's token in the same statement, where the lease
    /// is checked on the row's newest version (a taker of a lease holds the advisory lock until
    /// its row is written). The token's commit is synchronous whatever the server's default
    /// (`synchronous_commit` set for this transaction only): flushed to disk, and to the
    /// synchronous standbys the server names, before the token reaches the caller, so that a
    /// crash or a failover to such a standby never gives a token twice. The grant returns at
    /// the statement's end, without waiting for a confirmation of that commit: the advisory
    /// lock is the session's whatever becomes of the commit, and
    /// ``PostgresLockGuard/fencingToken()`` confirms the commit before it gives the token. A
    /// shared grant reads the lease in a second statement, after the advisory lock is held.
    private func grantInSession(_ mode: LockMode, id: Int32, wait: Bool, on connection: PostgresConnection)
      async throws -> UInt64?
    {
      let connector = container.connector
      let lockClass = Schema.lockClass
      let limit = wait ? nil : connector.timing.replyTimeout
      // A statement that runs in another session than the connection's takes nothing, and is
      // refused (a pooler that shares sessions).
      let ownSession = connector.inOwnSession(connection)
      switch mode {
      case .exclusive:
        // One branch of the CASE runs: the wait, or the try.
        let rows = try await Connector.run(
          """
          WITH granted AS MATERIALIZED (
            SELECT CASE WHEN NOT \(unescaped: ownSession) THEN false
              WHEN \(wait) THEN (SELECT true FROM (SELECT pg_advisory_lock(\(lockClass), \(id))) AS w)
              ELSE pg_try_advisory_lock(\(lockClass), \(id)) END AS held,
              set_config('synchronous_commit', 'on', true)),
          token AS (
            UPDATE liaison.lock SET fencing_token = fencing_token + 1 FROM granted
            WHERE granted.held AND id = \(id) AND \(unescaped: HeldLease.noLease)
              AND NOT \(unescaped: HeldLease.mayBeFenced)
            RETURNING fencing_token)
          SELECT granted.held, (SELECT fencing_token FROM token), pg_backend_pid() FROM granted
          """, on: connection, within: limit, logger: connector.quietLogger)
        let (held, token, session) = try rows.first!.decode((Bool, Int64?, Int32).self)
        try connector.checkSession(of: connection, ranIn: session)
        guard held else { return nil }
        if let token { return UInt64(bitPattern: token) }
        // A row a lease held (``HeldLease/mayBeFenced``): its fenced statement, if one is still
        // in flight, ends first (the row locked as every taker locks it), then the token.
        let fenced = try await Connector.run(
          """
          WITH durable AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true)),
          taken AS MATERIALIZED (
            SELECT 1 FROM liaison.lock WHERE id = \(id) AND \(unescaped: HeldLease.noLease) FOR UPDATE)
          UPDATE liaison.lock SET fencing_token = fencing_token + 1 FROM durable, taken
          WHERE id = \(id) AND \(unescaped: HeldLease.noLease)
          RETURNING fencing_token
          """, on: connection, within: limit, logger: connector.quietLogger)
        if let token = try fenced.first?.decode(Int64.self) { return UInt64(bitPattern: token) }
        _ = try await Connector.run(
          "SELECT pg_advisory_unlock(\(lockClass), \(id))", on: connection, within: connector.timing.replyTimeout,
          logger: connector.quietLogger)
        return nil
      case .shared:
        let held = try await Connector.run(
          """
          SELECT CASE WHEN NOT \(unescaped: ownSession) THEN false
            WHEN \(wait) THEN (SELECT true FROM (SELECT pg_advisory_lock_shared(\(lockClass), \(id))) AS w)
            ELSE pg_try_advisory_lock_shared(\(lockClass), \(id)) END, pg_backend_pid()
          """, on: connection, within: limit, logger: connector.quietLogger)
        let (granted, session) = try held.first!.decode((Bool, Int32).self)
        try connector.checkSession(of: connection, ranIn: session)
        guard granted else { return nil }
        // The row locked as every taker locks it: a lease holder's statement in flight (its
        // fence holds the row, `FOR KEY SHARE`) ends first, and the lease is read as it is then.
        // The lock is all this transaction writes: its commit need not wait for the disk.
        let free = try await Connector.run(
          """
          SELECT \(unescaped: HeldLease.noExclusiveLease), set_config('synchronous_commit', 'off', true)
          FROM liaison.lock WHERE id = \(id) FOR UPDATE
          """, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        if try free.first.map({ try $0.decode((Bool, String).self).0 }) ?? true { return 0 }
        _ = try await Connector.run(
          "SELECT pg_advisory_unlock_shared(\(lockClass), \(id))", on: connection,
          within: connector.timing.replyTimeout, logger: connector.quietLogger)
        return nil
      }
    }

    /// The row id, the second key of the advisory locks; registered on first use.
    func resolveID() async throws(LiaisonError) -> Int32 { try await rowID.resolve() }
  }

  /// A held ``PostgresLock``. Released by ``unlock()``, or by the server when the holder's
  /// session ends.
  ///
  /// A guard dropped while held releases the lock too, in the background: its connection is
  /// closed, which ends its session (the container's ``PostgresContainer/close()`` waits for
  /// that). So `_ = try await lock.tryLock()` takes the lock and lets it go at once; await
  /// ``unlock()`` where the next step must see the lock free.
  public final class PostgresLockGuard: HeldLock {
    /// The mode the lock is held in.
    public let mode: LockMode
    /// The lock held.
    public let lock: PostgresLock
    private let id: Int32
    private let token: UInt64
    private let hold: Hold

    /// A lock held by `connection`'s session.
    init(lock: PostgresLock, id: Int32, mode: LockMode, token: UInt64, connection: PostgresConnection) {
      self.lock = lock
      self.id = id
      self.mode = mode
      self.token = token
      hold = .session(
        HeldSession(connection: connection, connector: lock.container.connector, what: "The lock '\(lock.name)'"))
    }

    /// A lock held as a lease.
    init(lock: PostgresLock, id: Int32, mode: LockMode, token: UInt64, lease: HeldLease) {
      self.lock = lock
      self.id = id
      self.mode = mode
      self.token = token
      hold = .lease(lease)
    }

    /// Whether the lock is still held: `false` once unlocked or lost.
    public var isHeld: Bool { hold.isHeld }

    /// Why the lock was lost (code ``/Liaison/LiaisonError/Code/lost``): its connection closed (a server
    /// restart, a terminated session) or stopped answering (a cut network, within the detection
    /// bound). `nil` while held and after ``unlock()``.
    public var loss: LiaisonError? { hold.loss }

    /// Waits until the lock is lost and returns why; `nil` once it is unlocked instead.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled first: the
    ///   lock may still be held.
    public func waitForLoss() async throws(LiaisonError) -> LiaisonError? { try await hold.waitForLoss() }

    /// This grant's fencing token: larger than the token of every earlier exclusive grant of this
    /// lock in its namespace, across server restarts (it is stored in the table `liaison.lock`,
    /// committed with the grant).
    ///
    /// It is returned only once the grant's commit has finished: flushed to the server's disk,
    /// and to the synchronous standbys it names. The first call confirms that with one round trip
    /// in the lock's session, unless a statement of the session has already been answered since
    /// the grant (a heartbeat, a statement run under the lock); later calls cost nothing.
    ///
    /// Guard a write with it, so that a holder whose lock ended without its knowing is refused:
    ///
    /// ```sql
    /// UPDATE report SET body = $1, fencing_token = $2 WHERE id = 7 AND fencing_token <= $2
    /// ```
    ///
    /// No row updated means a later holder has written: stop.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` for a shared lock; the loss
    ///   (``/Liaison/LiaisonError/Code/lost``) when the lock was lost before its commit was
    ///   confirmed (the token may not have been committed);
    ///   ``/Liaison/LiaisonError/Code/unavailable`` when it was unlocked before, and its release
    ///   failed.
    public func fencingToken() async throws(LiaisonError) -> UInt64 {
      guard mode == .exclusive else {
        throw LiaisonError(
          .invalidArgument,
          "The lock '\(lock.name)' is held shared: only an exclusive lock has a fencing token. Take it exclusive to "
            + "guard a write with a token.")
      }
      if case .session(let session) = hold, !session.isAnswered { try await confirmGrant(session) }
      return token
    }

    /// Waits until the server has answered a statement of the session after the grant's, which
    /// it runs only once the grant's commit has finished (``HeldSession/isAnswered``).
    ///
    /// postgres-nio ends a statement at its `CommandComplete`, which the server sends before the
    /// commit of the statement's implicit transaction (at the `Sync` after it). The server keeps
    /// it in its buffer until its `ReadyForQuery`, after the commit, unless a message sent during
    /// the commit carries it out first: a session terminated while its commit waits for a
    /// synchronous standby (its warning), a server shut down or crashing meanwhile. Then the
    /// commit may be lost, or never made, and the session ends: the lock is lost, and the token
    /// never reaches the caller.
    private func confirmGrant(_ session: HeldSession) async throws(LiaisonError) {
      guard session.connection != nil else {
        throw session.loss
          ?? LiaisonError(
            .unavailable,
            "The lock '\(lock.name)' was being unlocked, or was handed to a command, before the server confirmed that "
              + "its fencing token was committed, so the token cannot be given. Ask for the token while the lock is "
              + "held (before unlock()), or take the lock again.")
      }
      _ = try await run(
        "SELECT 1", doing: "confirm the commit of the fencing token of the lock '\(lock.name)'", committing: false)
    }

    /// Runs `query` in the session that holds the lock, so that it runs only while the lock is
    /// held: a lost lock's connection is closed, and a statement cannot run in a session that the
    /// server ended. A failed statement ends the hold (the connection is closed). The statement
    /// runs to its end even when the calling task is cancelled: postgres-nio ends a cancelled
    /// query by closing its connection, which would lose the lock. `committing`: see
    /// ``Connector/run(_:on:within:logger:committing:)``. A statement answered confirms the
    /// grant's commit (``fencingToken()``).
    ///
    /// - Throws: the loss (``/Liaison/LiaisonError/Code/lost``) when the lock was lost before or
    ///   while the statement ran, or when the statement failed; ``/Liaison/LiaisonError/Code/invalidArgument``
    ///   after ``unlock()``.
    ///
    /// With a `timeout`, the statement (a write) runs in a transaction whose `lock_timeout` is
    /// `timeout`: when it passes, the transaction is rolled back, nothing is written, the hold
    /// stays, and this throws ``/Liaison/LiaisonError/Code/timedOut``.
    func run(_ query: PostgresQuery, doing what: String, committing: Bool, timeout: Duration? = nil)
      async throws(LiaisonError) -> [PostgresRow]
    {
      let session: HeldSession
      switch hold {
      case .session(let held): session = held
      case .lease(let lease): return try await runLeased(query, on: lease, doing: what, timeout: timeout)
      }
      guard let connection = session.connection else {
        throw session.loss
          ?? LiaisonError(.invalidArgument, "Could not \(what): the lock '\(lock.name)' was already unlocked.")
      }
      let connector = lock.container.connector
      do {
        // In a task of its own, awaited here: the statement runs to its end when the caller is
        // cancelled.
        // The statement itself has no reply bound: it may wait for rows other processes' writes
        // hold, for as long as they hold them (or `timeout`), and a long transaction elsewhere is
        // not a dead server. The connection's keepalives notice one within the detection bound.
        let rows = try await Task {
          try await session.running {
            let limit = connector.timing.replyTimeout
            guard let timeout else {
              return try await Connector.run(
                query, on: connection, within: nil, logger: connector.quietLogger, committing: committing)
            }
            try await Connector.begin(on: connection, lockTimeout: timeout, within: limit, logger: connector.logger)
            do {
              let rows = try await Connector.run(query, on: connection, within: nil, logger: connector.quietLogger)
              _ = try await Connector.run("COMMIT", on: connection, within: limit, logger: connector.quietLogger)
              return rows
            } catch  where PostgresErrors.sqlState(error) == PostgresErrors.lockNotAvailable {
              // The hold stays: roll back, so that the session can serve the next statement.
              _ = try await Connector.run("ROLLBACK", on: connection, within: limit, logger: connector.quietLogger)
              throw PostgresErrors.translate(error, doing: what, timeout: timeout)
            }
          }
        }.value
        session.markAnswered()
        return rows
      } catch let error as LiaisonError where error.code == .timedOut && session.loss == nil {
        throw error
      } catch {
        if let loss = session.loss { throw loss }
        let failure = PostgresErrors.translate(error, doing: what)
        session.lose("a statement in its session failed (\(failure))")
        throw session.loss ?? failure
      }
    }

    /// ``run(_:doing:committing:timeout:)`` for a lease: in a transaction that holds the lease
    /// while it runs (a failed statement leaves the lease held).
    private func runLeased(_ query: PostgresQuery, on lease: HeldLease, doing what: String, timeout: Duration?)
      async throws(LiaisonError) -> [PostgresRow]
    {
      guard lease.isHeld else {
        throw lease.loss
          ?? LiaisonError(.invalidArgument, "Could not \(what): the lock '\(lock.name)' was already unlocked.")
      }
      do {
        // In a task of its own, awaited here: the statement runs to its end when the caller is
        // cancelled (postgres-nio ends a cancelled query by closing its connection).
        return try await Task { try await lease.runFenced(query, doing: what, committing: true, timeout: timeout) }
          .value
      } catch {
        throw PostgresErrors.translate(error, doing: what, timeout: timeout)
      }
    }

    /// Runs `action` once the hold ends, lost or released.
    func whenEnded(_ action: @escaping @Sendable () -> Void) { hold.whenEnded(action) }

    /// The descriptor, in this process, of the socket whose session holds the lock; `nil` once
    /// unlocked or lost. A child that inherits it holds the session, and so the lock, with this
    /// process.
    package var sessionSocket: CInt? { hold.socketDescriptor }

    /// Leaves the lock to the processes holding its session's socket (``sessionSocket``): it is
    /// neither unlocked nor its connection closed by this process any more; the server releases it
    /// when the last of them ends.
    package func leaveToSocketHolders() {
      if case .session(let session) = hold { session.leaveOpenUntilExit() }
    }

    /// Releases the lock. Calling it again does nothing. If the release fails, the connection is
    /// closed, which releases the lock on the server.
    public func unlock() async {
      let session: HeldSession
      switch hold {
      case .session(let held): session = held
      case .lease(let lease): return await lease.release()
      }
      guard let connection = session.end(nil) else { return }
      let connector = lock.container.connector
      let unlock: PostgresQuery =
        mode == .exclusive
        ? "SELECT pg_advisory_unlock(\(Schema.lockClass), \(id)), set_config('lock_timeout', '0', false)"
        : "SELECT pg_advisory_unlock_shared(\(Schema.lockClass), \(id)), set_config('lock_timeout', '0', false)"
      do {
        let rows = try await Connector.run(
          unlock, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        session.markAnswered()  // the grant's commit has finished: fencingToken() may still give it
        if try rows.first?.makeRandomAccess()[0].decode(Bool.self) == true {
          connector.giveBack(connection)
          return
        }
      } catch {}
      connector.close(connection)
    }
  }
#endif
