#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// A lock or claim held as a **lease** (the URL's `pool_mode=transaction`): a row that names
  /// its holder and when the hold ends by the server's clock, renewed in short transactions,
  /// each of which may run in any session. What a pooler in transaction mode allows, since it
  /// hands a session to another client after every transaction.
  ///
  /// Every taker, renewal and release is one statement, and so one transaction; each is taken
  /// only when the lease has ended (``DetectionTiming/leaseLength`` after the last renewal) or was released. The
  /// holder trusts its lease for ``DetectionTiming/leaseTrusted`` after it sent its last
  /// renewal that succeeded, well short of the lease's end: a holder cut off from the server
  /// learns of the loss before anyone else may take the lease. A holder that dies is passed over
  /// once its lease ends: within the detection bound, not at once as with a session.
  final class HeldLease: Sendable {
    /// What is held: a lock (exclusive or shared) or a presence's claim, by row id.
    enum Kind: Sendable {
      case lock(id: Int32, mode: LockMode)
      case claim(id: Int32, namespace: String, name: String)
    }

    private struct State: Sendable {
      var held = true
      /// Until when the holder may rely on its lease (see ``DetectionTiming/leaseTrusted``).
      var trustedUntil: LiaisonClock.Instant
      var monitor: Task<Void, Never>?
      /// Whether a renewal is under way (at most one at a time).
      var renewing = false
      var end = LossState()
      var onEnd: [@Sendable () -> Void] = []
    }

    let connector: Connector
    let kind: Kind
    /// The holder's id in the lease's row: made for this hold alone.
    let holder: String
    private let what: String
    private let state: Locked<State>

    /// A lease just taken by `holder` with a statement sent at `sent`.
    init(kind: Kind, holder: String, sent: LiaisonClock.Instant, connector: Connector, what: String) {
      self.kind = kind
      self.holder = holder
      self.connector = connector
      self.what = what
      state = Locked(State(trustedUntil: sent + connector.timing.leaseTrusted))
      // Wakes every seventh of the bound to renew, and when the trust runs out: a renewal that
      // hangs (a pooler or server that stopped answering, a connect that waits) runs on its own,
      // so that the loss is told on time whatever it waits for.
      let monitor = connector.background.start { [weak self] in
        while !Task.isCancelled {
          guard let wait = self?.untilNextCheck(), let clock = self?.connector.clock else { return }
          do {
            try await clock.sleep(for: wait)
          } catch {
            break
          }
          guard let self, self.check() else { return }
        }
        // Cancelled: the container is closing, and nothing renews the lease any more.
        self?.lose(Self.closedReason)
      }
      state.withLock { $0.monitor = monitor }
      // Taken as the container closes: nothing would renew it, or release it at the close.
      if monitor == nil || !connector.watch(self) { lose(Self.closedReason) }
    }

    private static let closedReason = "its PostgresContainer was closed"

    /// A lease dropped while held is released in the background (its row is freed).
    deinit {
      let (wasHeld, monitor, onEnd) = state.withLock { state in
        defer { state.held = false }
        return (state.held, state.monitor.take(), state.onEnd)
      }
      monitor?.cancel()
      connector.stopWatching(self)
      guard wasHeld else { return }
      for action in onEnd { action() }
      Self.releaseInBackground(kind, holder: holder, connector: connector)
    }

    /// Whether the lease is held and trusted now: a holder whose trust has run out (its process
    /// stopped, or swapped out, or its renewals too slow) reads `false` at once, and the loss,
    /// whether or not the monitor's task has had a thread since to notice.
    var isHeld: Bool {
      endIfUntrusted()
      return state.withLock { $0.held }
    }

    /// Why the lease was lost, once it was (its trust running out included, as for ``isHeld``).
    var loss: LiaisonError? {
      endIfUntrusted()
      return state.withLock { $0.end.loss }
    }

    /// Ends the lease as lost if its trust has run out while it was held.
    private func endIfUntrusted() {
      guard state.withLock({ $0.held && $0.trustedUntil <= connector.clock.now }) else { return }
      lose(Self.untrusted)
    }

    private static let untrusted =
      "its lease could not be renewed in time (a cut network, a server or pooler stopped or overloaded, or this "
      + "process stopped or too busy to renew it), and others may take it once it ends"

    /// Waits until the lease is lost and returns why; `nil` once released.
    func waitForLoss() async throws(LiaisonError) -> LiaisonError? {
      let loss = await state.waitForLoss(\.end)
      if loss == nil, Task.isCancelled, isHeld {
        throw LiaisonError.cancelled("waiting for the loss of \(what.prefix(1).lowercased() + what.dropFirst())")
      }
      return loss
    }

    /// Runs `action` once the lease ends, lost or released (at once if it has ended already).
    func whenEnded(_ action: @escaping @Sendable () -> Void) {
      let ended = state.withLock { state -> Bool in
        guard state.held else { return true }
        state.onEnd.append(action)
        return false
      }
      if ended { action() }
    }

    /// Ends the lease as lost and frees its row in the background (a row another holder took
    /// meanwhile is left alone).
    func lose(_ reason: String) {
      let loss = LiaisonError(
        .lost,
        "\(what) was lost: \(reason). Another process may hold it now; stop what you do under it, and take it again.")
      guard end(loss) else { return }
      Self.releaseInBackground(kind, holder: holder, connector: connector)
    }

    /// Releases the lease: frees its row, and returns once that committed (or failed: the lease
    /// then ends by itself within the detection bound). Calling it again does nothing.
    func release() async {
      guard end(nil) else { return }
      _ = try? await connector.query(Self.release(kind, holder: holder), doing: "release a lease", committing: true)
    }

    /// Ends the hold for the container's `close()`: lost, its row freed before this returns.
    func endForClose() async {
      let loss = LiaisonError(
        .lost,
        "\(what) was lost: \(Self.closedReason). Another process may hold it now; stop what you do under it, and "
          + "take it again.")
      guard end(loss) else { return }
      _ = try? await connector.query(Self.release(kind, holder: holder), doing: "release a lease", committing: true)
    }

    /// Marks the hold ended; `false` if it had ended already.
    private func end(_ loss: LiaisonError?) -> Bool {
      let ended = state.withLock {
        state -> ([CheckedContinuation<LiaisonError?, Never>], [@Sendable () -> Void], Task<Void, Never>?)? in
        guard state.held else { return nil }
        state.held = false
        let onEnd = state.onEnd
        state.onEnd = []
        return (state.end.end(loss), onEnd, state.monitor.take())
      }
      guard let (waiters, onEnd, monitor) = ended else { return false }
      monitor?.cancel()
      connector.stopWatching(self)
      waiters.resumeAll(loss)
      for action in onEnd { action() }
      return true
    }

    /// How long to wait before the next check: a seventh of the bound, or less when the trust
    /// runs out sooner; `nil` once the hold has ended.
    private func untilNextCheck() -> Duration? {
      state.withLock { state -> Duration? in
        guard state.held else { return nil }
        let left = state.trustedUntil - connector.clock.now
        return max(.zero, min(connector.timing.heartbeatInterval, left))
      }
    }

    /// Ends the hold as lost once the trust has run out, or starts a renewal unless one is under
    /// way; `false` once the hold has ended.
    private func check() -> Bool {
      enum Next { case ended, lost, renew, wait }
      let next = state.withLock { state -> Next in
        guard state.held else { return .ended }
        if state.trustedUntil <= connector.clock.now { return .lost }
        if state.renewing { return .wait }
        state.renewing = true
        return .renew
      }
      switch next {
      case .ended:
        return false
      case .lost:
        lose(Self.untrusted)
        return false
      case .wait:
        return true
      case .renew:
        connector.background.start { [weak self] in await self?.renew() }
        return true
      }
    }

    /// One renewal: the trust is extended from when it was sent; a row no longer this holder's
    /// ends the hold as lost. A failure is tried again at the next check, until the trust runs
    /// out.
    private func renew() async {
      defer { state.withLock { $0.renewing = false } }
      guard isHeld else { return }
      let sent = connector.clock.now
      do {
        // A new connection, if one is needed, while the lease is still trusted: a first server
        // that does not answer leaves time for the next.
        let rows = try await connector.query(
          Self.renewal(kind, holder: holder, length: connector.timing.leaseLength), doing: "renew a lease",
          before: state.withLock { $0.trustedUntil })
        guard !rows.isEmpty else {
          lose("its lease had ended when this process renewed it (the process or its connection was too slow)")
          return
        }
        state.withLock { $0.trustedUntil = max($0.trustedUntil, sent + connector.timing.leaseTrusted) }
      } catch {
        // Tried again at the next check, until the trust runs out.
      }
    }

    /// Runs `query` in a transaction that first checks, and keeps for its length, this holder's
    /// lease: it runs only while the lease is held, and no other holder can take the lease
    /// before it commits, while renewals go on beside it. Throws the loss when the lease had
    /// ended.
    func runFenced(
      _ query: PostgresQuery, doing what: String, committing: Bool, timeout: Duration?
    ) async throws -> [PostgresRow] {
      guard case .lock(let id, let mode) = kind else { preconditionFailure("only a lock's lease fences work") }
      let connector = connector
      let connection = try await connector.take()
      let limit = connector.timing.replyTimeout
      let rows: [PostgresRow]?
      do {
        try await Connector.begin(on: connection, lockTimeout: timeout, within: limit, logger: connector.quietLogger)
        let fence = try await Connector.run(
          Self.fence(lock: id, mode: mode, holder: holder), on: connection, within: limit, logger: connector.quietLogger
        )
        if fence.isEmpty {
          _ = try await Connector.run("ROLLBACK", on: connection, within: limit, logger: connector.quietLogger)
          rows = nil
        } else {
          // No reply bound, as under a session's hold: the statement may wait for rows other
          // processes' writes hold, for as long as they hold them (or `timeout`), and its fence
          // keeps the lease from any other taker meanwhile. The connection's keepalives notice a
          // dead peer within the detection bound.
          rows = try await Connector.run(query, on: connection, within: nil, logger: connector.quietLogger)
          _ = try await Connector.run("COMMIT", on: connection, within: limit, logger: connector.quietLogger)
        }
      } catch {
        connector.close(connection)
        throw error
      }
      connector.giveBack(connection)
      if let rows { return rows }
      // The lease had ended: lost (or released meanwhile by this process).
      lose("its lease had ended (the process or its connection was too slow to renew it)")
      throw loss
        ?? LiaisonError(
          .invalidArgument,
          "Could not \(what): \(self.what.prefix(1).lowercased() + self.what.dropFirst()) was already released.")
    }

    /// Runs `statement` (a take, for a holder id made here) and returns the holder, when the
    /// statement was sent, and its first row; `nil` when another holder has it. A take whose
    /// outcome is unknown (it may have committed: an error after it was sent) is freed in the
    /// background, and so is one that came back after its trust ran out (it throws
    /// ``/Liaison/LiaisonError/Code/unavailable`` then).
    static func take(
      _ kind: Kind, connector: Connector, doing what: String, committing: Bool,
      statement: (String) -> PostgresQuery
    ) async throws(LiaisonError) -> (holder: String, sent: LiaisonClock.Instant, row: PostgresRow)? {
      let holder = UUID().uuidString
      let sent = connector.clock.now
      let rows: [PostgresRow]
      do {
        rows = try await connector.query(statement(holder), doing: what, committing: committing)
      } catch {
        releaseInBackground(kind, holder: holder, connector: connector)
        throw error
      }
      guard let row = rows.first else { return nil }
      let took = connector.clock.now - sent
      guard took < connector.timing.leaseTrusted else {
        releaseInBackground(kind, holder: holder, connector: connector)
        throw LiaisonError(
          .unavailable,
          "Could not \(what): the server granted it after \(took), too late for this process to rely on it (a lease "
            + "is trusted for \(connector.timing.leaseTrusted)); it was let go. Try again.")
      }
      return (holder, sent, row)
    }

    /// Frees `holder`'s lease in the container's background work (if it is still its own).
    static func releaseInBackground(_ kind: Kind, holder: String, connector: Connector) {
      let release = release(kind, holder: holder)
      connector.background.start {
        _ = try? await connector.query(release, doing: "release a lease")
      }
    }

    // MARK: The statements

    /// The server's clock now, in milliseconds since 1970: the unit of shared leases' ends.
    private static let nowMilliseconds = "(extract(epoch FROM clock_timestamp()) * 1000)"

    /// Whether no exclusive lease holds the lock's row: SQL.
    static let noExclusiveLease = "(lease_end IS NULL OR lease_end <= clock_timestamp())"

    /// Whether a lease's fenced statement may be in flight on the lock's row: a lease holds it, or
    /// held it and ended without a release (SQL). A session's exclusive grant locks the row `FOR
    /// UPDATE`, in a second statement, only then: on a row no lease holds or left, it is one
    /// statement as before. An exclusive lease's release waits for its own fenced statements (it
    /// locks the row too), so that its holder cleared means none is in flight.
    static let mayBeFenced = "(lease_holder IS NOT NULL OR shared_leases <> '{}'::jsonb)"

    /// Whether no lease holds the lock's row, exclusive or shared: SQL.
    static let noLease = """
      \(noExclusiveLease) AND NOT EXISTS (
        SELECT 1 FROM jsonb_each_text(shared_leases) AS s(holder, ends) WHERE s.ends::float8 > \(nowMilliseconds))
      """

    /// Takes a lock's lease for `holder` if it is free, and for an exclusive one adds one to the
    /// lock's fencing token (committed synchronously, as a session grant's): one row with the
    /// token (0 for shared), none when another holder has it. A session holder (a process
    /// connected directly, or through a session pooler) excludes a lease too: the statement
    /// takes the lock's advisory lock for its transaction, which fails while a session holds it
    /// (and makes a session wait until the lease's row is written, which it then reads).
    ///
    /// A row that looks free is locked `FOR UPDATE` first, as every taker locks it, and read
    /// again: a fenced statement of a holder whose lease ended meanwhile ends first (see
    /// ``fence(lock:mode:holder:)``). A row held by another lease is not waited for.
    static func take(lock id: Int32, mode: LockMode, holder: String, length: Duration) -> PostgresQuery {
      let milliseconds = Int64(length.clampedNanoseconds / 1_000_000)
      switch mode {
      case .exclusive:
        return """
          WITH durable AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true)),
          taken AS MATERIALIZED (SELECT 1 FROM liaison.lock WHERE id = \(id) AND \(unescaped: noLease) FOR UPDATE)
          UPDATE liaison.lock SET fencing_token = fencing_token + 1, lease_holder = \(holder)::uuid,
            lease_end = clock_timestamp() + \(milliseconds)::float8 * interval '1 millisecond'
          FROM durable, taken
          WHERE id = \(id) AND \(unescaped: noLease) AND pg_try_advisory_xact_lock(\(Schema.lockClass), \(id))
          RETURNING fencing_token
          """
      case .shared:
        return """
          WITH taken AS MATERIALIZED (
            SELECT 1 FROM liaison.lock WHERE id = \(id) AND \(unescaped: noExclusiveLease) FOR UPDATE)
          UPDATE liaison.lock SET shared_leases = (
              SELECT coalesce(jsonb_object_agg(s.holder, s.ends), '{}'::jsonb)
              FROM jsonb_each(shared_leases) AS s(holder, ends)
              WHERE (s.ends #>> '{}')::float8 > \(unescaped: nowMilliseconds))
            || jsonb_build_object(\(holder)::text, \(unescaped: nowMilliseconds) + \(milliseconds)::float8)
          FROM taken
          WHERE id = \(id) AND \(unescaped: noExclusiveLease)
            AND pg_try_advisory_xact_lock_shared(\(Schema.lockClass), \(id))
          RETURNING 0::bigint
          """
      }
    }

    /// Takes a presence's claim as a lease for `holder`, writing the holder record and
    /// notifying observers, when no lease or session holds it: one row if taken.
    static func take(
      claim id: Int32, holder: String, length: Duration, host: String, pid: Int32, info: String?,
      namespace: String, name: String
    ) -> PostgresQuery {
      let milliseconds = Int64(length.clampedNanoseconds / 1_000_000)
      return """
        UPDATE liaison.presence SET host = \(host), pid = \(pid), info = \(info), since = now(), backend_pid = NULL,
          lease_holder = \(holder)::uuid, lease_end = clock_timestamp() + \(milliseconds)::float8 * interval '1 millisecond'
        WHERE id = \(id) AND (lease_end IS NULL OR lease_end <= clock_timestamp())
          AND pg_try_advisory_xact_lock(\(Schema.claimClass), \(id))
        RETURNING pg_notify('liaison', concat_ws(' ', 'p', \(namespace), \(name)))
        """
    }

    /// Extends `holder`'s lease by `length` from now, if it is still its own and has not ended:
    /// one row if renewed.
    static func renewal(_ kind: Kind, holder: String, length: Duration) -> PostgresQuery {
      let milliseconds = Int64(length.clampedNanoseconds / 1_000_000)
      switch kind {
      case .lock(let id, .exclusive):
        return """
          UPDATE liaison.lock SET lease_end = clock_timestamp() + \(milliseconds)::float8 * interval '1 millisecond'
          WHERE id = \(id) AND lease_holder = \(holder)::uuid AND lease_end > clock_timestamp() RETURNING 1
          """
      case .lock(let id, .shared):
        return """
          UPDATE liaison.lock
          SET shared_leases = jsonb_set(
            shared_leases, ARRAY[\(holder)::text], to_jsonb(\(unescaped: nowMilliseconds) + \(milliseconds)::float8))
          WHERE id = \(id) AND (shared_leases ->> \(holder)::text)::float8 > \(unescaped: nowMilliseconds) RETURNING 1
          """
      case .claim(let id, _, _):
        return """
          UPDATE liaison.presence SET lease_end = clock_timestamp() + \(milliseconds)::float8 * interval '1 millisecond'
          WHERE id = \(id) AND lease_holder = \(holder)::uuid AND lease_end > clock_timestamp() RETURNING 1
          """
      }
    }

    /// Frees `holder`'s lease, if it is still its own (a claim's release notifies observers).
    static func release(_ kind: Kind, holder: String) -> PostgresQuery {
      switch kind {
      case .lock(let id, .exclusive):
        // The row locked as a taker locks it: a fenced statement of this holder still in flight
        // ends first (see ``mayBeFenced``).
        return """
          WITH taken AS MATERIALIZED (
            SELECT 1 FROM liaison.lock WHERE id = \(id) AND lease_holder = \(holder)::uuid FOR UPDATE)
          UPDATE liaison.lock SET lease_holder = NULL, lease_end = NULL FROM taken
          WHERE id = \(id) AND lease_holder = \(holder)::uuid
          """
      case .lock(let id, .shared):
        return "UPDATE liaison.lock SET shared_leases = shared_leases - \(holder)::text WHERE id = \(id)"
      case .claim(let id, let namespace, let name):
        return """
          UPDATE liaison.presence SET lease_holder = NULL, lease_end = NULL
          WHERE id = \(id) AND lease_holder = \(holder)::uuid
          RETURNING pg_notify('liaison', concat_ws(' ', 'p', \(namespace), \(name)))
          """
      }
    }

    /// One row while `holder`'s lock lease holds, which it locks `FOR KEY SHARE` for the
    /// transaction. Takers lock the row `FOR UPDATE` and so wait for that transaction's end, then
    /// find the lease as it is; renewals and releases update no key, and so never wait for it: a
    /// fenced statement that waits (behind another writer's row lock, for its own timeout) keeps
    /// its lease renewed meanwhile.
    static func fence(lock id: Int32, mode: LockMode, holder: String) -> PostgresQuery {
      switch mode {
      case .exclusive:
        return """
          SELECT 1 FROM liaison.lock
          WHERE id = \(id) AND lease_holder = \(holder)::uuid AND lease_end > clock_timestamp() FOR KEY SHARE
          """
      case .shared:
        return """
          SELECT 1 FROM liaison.lock
          WHERE id = \(id) AND (shared_leases ->> \(holder)::text)::float8 > \(unescaped: nowMilliseconds) FOR KEY SHARE
          """
      }
    }
  }
#endif
#if Postgres
  import Liaison

  /// How a lock or claim is held: by a session of its own (``HeldSession``), or as a lease
  /// (``HeldLease``, through a pooler in transaction mode).
  enum Hold: Sendable {
    case session(HeldSession)
    case lease(HeldLease)

    var isHeld: Bool {
      switch self {
      case .session(let session): session.isHeld
      case .lease(let lease): lease.isHeld
      }
    }

    var loss: LiaisonError? {
      switch self {
      case .session(let session): session.loss
      case .lease(let lease): lease.loss
      }
    }

    func waitForLoss() async throws(LiaisonError) -> LiaisonError? {
      switch self {
      case .session(let session): try await session.waitForLoss()
      case .lease(let lease): try await lease.waitForLoss()
      }
    }

    func whenEnded(_ action: @escaping @Sendable () -> Void) {
      switch self {
      case .session(let session): session.whenEnded(action)
      case .lease(let lease): lease.whenEnded(action)
      }
    }

    /// The descriptor of the session's socket in this process; `nil` for a lease, which no
    /// socket holds.
    var socketDescriptor: CInt? {
      guard case .session(let session) = self else { return nil }
      return session.socketDescriptor
    }
  }
#endif
