#if Postgres
  import Liaison
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// How `LiaisonPostgres` opens connections, with the settings that bound how long a dead peer
  /// goes unnoticed, and keeps a few idle ones for statements that hold nothing.
  final class Connector: Sendable {
    /// The servers, tried in order, and what a server must be to be taken.
    let targets: ConnectionTargets
    /// The servers (by ``ConnectionTarget/name``) that refused the server's settings as startup
    /// parameters (a pooler, such as PgBouncer, answering for the server; its own settings decide
    /// there): connections to them are made without those settings (``serverSettingNames``).
    private let serverSettingsRefused = Locked<Set<String>>([])
    /// The startup parameters that only a server takes: its keepalives and checks for a vanished
    /// client.
    private static let serverSettingNames: Set<String> = [
      "tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout",
      "client_connection_check_interval",
    ]
    let timing: DetectionTiming
    /// The clock of every timed decision of the container's (trust windows, heartbeats, turns,
    /// deadlines): the system's, unless a test gives a manual one.
    let clock: LiaisonClock
    /// The turns of this process's tasks that wait for the same lock of the container's
    /// (``WaitingTurns``), on ``clock``.
    let lockTurns: WaitingTurns
    /// The logger of postgres-nio's connections and of the failures of background work.
    let logger: Logger
    /// How many idle connections are kept for reuse at most.
    let maximumIdle: Int
    /// The event loops of the connections.
    let eventLoopGroup: any EventLoopGroup
    /// The container's background tasks, which ``PostgresContainer/close()`` ends.
    let background = BackgroundWork()
    /// Set by ``PostgresContainer/close()``: no connection is made or lent any more.
    private let closed = Locked(false)
    /// Every connection open now, by connection, until its close completes: what
    /// ``closeAll()`` closes and waits for.
    private let open = Locked<[ObjectIdentifier: PostgresConnection]>([:])
    /// Idle connections whose session holds no lock: reused for statements, and for a lock's
    /// next grant.
    private let idle = Locked<[PostgresConnection]>([])
    private let nextID = Locked(0)
    /// The session holding something on each connection, if any, by connection: told once, by
    /// the one close callback each connection gets when it is made, when its connection closes.
    private let holders = Locked<[ObjectIdentifier: WeakHolder]>([:])
    /// Each open connection's socket descriptor in this process, by connection.
    private let sockets = Locked<[ObjectIdentifier: CInt]>([:])
    /// The server session (backend process id) of each open connection, learned when it was
    /// made, unless holds are leases: what every grant and heartbeat checks (``checkSession(of:ranIn:)``).
    private let sessions = Locked<[ObjectIdentifier: Int32]>([:])

    private struct WeakHolder: @unchecked Sendable {
      weak var session: HeldSession?
    }

    /// The leases held (``HeldLease``), which ``closeAll()`` releases.
    private let leases = Locked<[ObjectIdentifier: WeakLease]>([:])

    private struct WeakLease: @unchecked Sendable {
      weak var lease: HeldLease?
    }

    /// Set when ``closeAll()`` begins to release the leases: none is watched after.
    private let leasesClosed = Locked(false)

    /// Keeps `lease` for ``closeAll()`` to release, until it stops watching it; `false`,
    /// keeping nothing, once the container is closing (the lease must end at once).
    func watch(_ lease: HeldLease) -> Bool {
      leasesClosed.withLock { closed in
        guard !closed else { return false }
        leases.withLock { $0[ObjectIdentifier(lease)] = WeakLease(lease: lease) }
        return true
      }
    }

    func stopWatching(_ lease: HeldLease) {
      leases.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(lease)) }
    }

    init(
      targets: ConnectionTargets, timing: DetectionTiming, logger: Logger, maximumIdle: Int,
      eventLoopGroup: any EventLoopGroup = PostgresConnection.defaultEventLoopGroup, clock: LiaisonClock = .system
    ) {
      self.eventLoopGroup = eventLoopGroup
      var targets = targets
      precondition(!targets.targets.isEmpty, "a Connector needs at least one server to connect to")
      for index in targets.targets.indices {
        var parameters = targets.targets[index].configuration.options.additionalStartupParameters
        // Operators see who is connected in pg_stat_activity: `liaison` unless the URL names it.
        if !parameters.contains(where: { $0.0 == "application_name" }) {
          parameters.append(("application_name", "liaison"))
        }
        // The server ends the session of a client that stops answering (dead host, cut network)
        // within about half the detection bound, which releases its advisory locks; and checks
        // for a vanished client while a statement (a lock wait) runs.
        parameters += [
          ("tcp_keepalives_idle", "\(timing.keepaliveIdle)"),
          ("tcp_keepalives_interval", "\(timing.keepaliveInterval)"),
          ("tcp_keepalives_count", "\(DetectionTiming.keepaliveCount)"),
          ("tcp_user_timeout", "\(timing.serverUserTimeoutMilliseconds)"),
          ("client_connection_check_interval", "\(timing.serverUserTimeoutMilliseconds / 2)"),
        ]
        targets.targets[index].configuration.options.additionalStartupParameters = parameters
      }
      self.targets = targets
      self.timing = timing
      self.clock = clock
      lockTurns = WaitingTurns(clock: clock)
      self.logger = logger
      self.maximumIdle = maximumIdle
    }

    /// postgres-nio's logger for the statements (the container's logger).
    var quietLogger: Logger { logger }

    /// The error of everything asked of a closed container.
    static let closedError = LiaisonError(
      .closed, "The PostgresContainer was closed: open a new one (PostgresContainer(url:namespace:)) to go on.")

    /// Throws ``closedError`` once the container is closed.
    func checkOpen() throws(LiaisonError) {
      if closed.withLock({ $0 }) { throw Self.closedError }
    }

    /// Seconds to wait for a server: the URL's `connect_timeout`, else the detection timing's.
    var connectTimeoutSeconds: Int { targets.connectTimeoutSeconds ?? timing.connectTimeoutSeconds }

    /// Whether locks and claims are leases and notifications are polled (the URL's
    /// `pool_mode=transaction`; see ``ConnectionTargets/holdsAreLeases``).
    var holdsAreLeases: Bool { targets.holdsAreLeases }

    /// A new connection, its socket set to notice a dead server within the detection bound.
    ///
    /// The servers are tried in order, as libpq tries the hosts of a URL: one that cannot be
    /// reached, refuses the connection, or is not what `target_session_attrs` asks for (checked
    /// after connecting) is passed over for the next. The error of a connection that every server
    /// refused names each server and why. A connection that ends while it is set up is tried once
    /// more: a loaded server or machine may drop one (seen under Thread Sanitizer with the whole
    /// test suite running).
    ///
    /// Before a `deadline` (a lease's renewal, which must come back while the lease is trusted),
    /// each server gets an equal share of the time left, at most its connect timeout: a first
    /// server that does not answer (its address dropped after a failover) leaves time for the
    /// next. Past the deadline, no further server is tried.
    func connect(before deadline: LiaisonClock.Instant? = nil) async throws(LiaisonError) -> PostgresConnection {
      let connection = try await connectToATarget(before: deadline)
      guard !holdsAreLeases else { return connection }
      do {
        let rows = try await Self.run(
          "SELECT pg_backend_pid()", on: connection, within: timing.replyTimeout, logger: quietLogger)
        let session = try rows.first!.decode(Int32.self)
        sessions.withLock { $0[ObjectIdentifier(connection)] = session }
        return connection
      } catch {
        close(connection)
        throw PostgresErrors.translate(error, doing: "connect to the server")
      }
    }

    /// Refuses a statement that ran in another server session than the one `connection` had
    /// when it was made: the endpoint hands sessions to other clients between transactions (a
    /// pooler in transaction or statement mode that the check at open did not catch, or that took
    /// the place of the server since). A lock or claim granted there would belong to whichever
    /// client gets that session next.
    ///
    /// A grant takes nothing in another session: its statement guards the lock with
    /// ``inOwnSession(_:)``.
    func checkSession(of connection: PostgresConnection, ranIn session: Int32) throws(LiaisonError) {
      let known = sessions.withLock { $0[ObjectIdentifier(connection)] }
      if let known, known != session { throw Self.sharedSessions }
    }

    /// SQL that is true when the statement runs in `connection`'s own server session (the one it
    /// learned when it was made): a grant's condition, so that it takes no lock in a session
    /// another client's statements run in next.
    func inOwnSession(_ connection: PostgresConnection) -> String {
      sessions.withLock { $0[ObjectIdentifier(connection)] }.map { "pg_backend_pid() = \($0)" } ?? "true"
    }

    private func connectToATarget(before deadline: LiaisonClock.Instant?) async throws(LiaisonError)
      -> PostgresConnection
    {
      try checkOpen()
      let attributes = targets.sessionAttributes
      var failures: [(target: ConnectionTarget, reason: String)] = []
      var lastError: (any Error)?
      // prefer-standby: the first server that is not a standby is kept until a standby answers.
      var fallback: PostgresConnection?
      /// Whether `error` ends the search: the caller was cancelled, or the container closed.
      func endsTheSearch(_ error: any Error) -> Bool {
        error is CancellationError || Task.isCancelled || closed.withLock { $0 }
      }
      for (index, target) in targets.targets.enumerated() {
        let connection: PostgresConnection
        var timeout = connectTimeoutSeconds
        if let deadline {
          let share = (deadline - clock.now) / (targets.targets.count - index)
          guard share > .zero else {
            failures.append((target, "not tried: the time to connect had run out"))
            continue
          }
          timeout = min(timeout, max(1, Int((Double(share.clampedNanoseconds) / 1e9).rounded(.up))))
        }
        do {
          do {
            connection = try await connectOnce(to: target, timeoutSeconds: timeout)
          } catch let error as PSQLError
            where error.code == .connectionError && PostgresTLS.connectFailure(error, host: nil) == nil
          {
            // Not a TLS failure, which would fail again.
            connection = try await connectOnce(to: target, timeoutSeconds: timeout)
          }
        } catch {
          if endsTheSearch(error) {
            fallback.map(close)
            throw PostgresErrors.translate(error, doing: "connect to the server")
          }
          let reason =
            PostgresTLS.connectFailure(error, host: target.configuration.host)?.message
            ?? PostgresErrors.connectionFailure(error, passwordSource: target.passwordSource)
          failures.append((target, reason))
          lastError = error
          continue
        }
        guard attributes.needsCheck else { return connection }
        do {
          let rows = try await Self.run(
            "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only') = 'on'",
            on: connection, within: timing.replyTimeout, logger: logger)
          guard let state = try rows.first?.decode((Bool, Bool).self) else {
            throw LiaisonError(.system, "the server did not say whether it is in recovery or read-only")
          }
          let (inRecovery, readOnly) = state
          if let mismatch = attributes.mismatch(inRecovery: inRecovery, readOnly: readOnly, fallback: false) {
            if attributes.mismatch(inRecovery: inRecovery, readOnly: readOnly, fallback: true) == nil,
              fallback == nil
            {
              fallback = connection
            } else {
              close(connection)
            }
            failures.append((target, mismatch + ", and target_session_attrs is \(attributes.rawValue)"))
            continue
          }
          fallback.map(close)
          return connection
        } catch {
          close(connection)
          if endsTheSearch(error) {
            fallback.map(close)
            throw PostgresErrors.translate(error, doing: "connect to the server")
          }
          failures.append((target, PostgresErrors.connectionFailure(error, passwordSource: target.passwordSource)))
          lastError = error
        }
      }
      if let fallback { return fallback }
      if targets.targets.count == 1, failures.count == 1, let lastError, let target = targets.targets.first {
        if let failure = PostgresTLS.connectFailure(lastError, host: target.configuration.host) { throw failure }
        let error = PostgresErrors.translate(lastError, doing: "connect to the server")
        guard let hint = PostgresErrors.passwordHint(lastError, passwordSource: target.passwordSource) else {
          throw error
        }
        throw LiaisonError(
          error.code, error.message + " " + hint.prefix(1).uppercased() + hint.dropFirst() + ".", cause: lastError)
      }
      throw LiaisonError(
        .unavailable,
        "Could not connect to "
          + (failures.count == 1
            ? "the PostgreSQL server " : "any of the \(failures.count) PostgreSQL servers, tried in order: ")
          + failures.map { "\($0.target.name): \($0.reason)" }.joined(separator: "; ")
          + ". Check that a server runs and can be reached (and, with target_session_attrs, that one is what it "
          + "asks for).", cause: lastError)
    }

    private func connectOnce(to target: ConnectionTarget, timeoutSeconds: Int) async throws -> PostgresConnection {
      let configuration = target.configuration
      let id = nextID.withLock { id -> Int in
        id += 1
        return id
      }
      let (channel, socket) = try await makeChannel(to: configuration, timeoutSeconds: timeoutSeconds)
      let refused = serverSettingsRefused.withLock { $0.contains(target.name) }
      var established = PostgresConnection.Configuration(
        establishedChannel: channel, tls: configuration.tls, username: configuration.username,
        password: configuration.password, database: configuration.database)
      established.options = configuration.options
      if refused {
        established.options.additionalStartupParameters.removeAll { Self.serverSettingNames.contains($0.0) }
      }
      // The server's name for TLS (SNI, and the check of verify-full), which postgres-nio takes
      // from the host only when it connects itself. An IP address is checked against the
      // certificate's addresses instead.
      if established.options.tlsServerName == nil, let host = configuration.host, !PostgresTLS.isIPAddress(host) {
        established.options.tlsServerName = host
      }
      established.options.connectTimeout = .seconds(Int64(timeoutSeconds))
      let connection: PostgresConnection
      do {
        connection = try await PostgresConnection.connect(
          on: channel.eventLoop, configuration: established, id: id, logger: logger)
      } catch let error as PSQLError
        where !refused && error.serverInfo?[.message]?.hasPrefix("unsupported startup parameter") == true
      {
        // A pooler (PgBouncer) answers for the server, and refuses the server's settings.
        serverSettingsRefused.withLock { _ = $0.insert(target.name) }
        return try await connectOnce(to: target, timeoutSeconds: timeoutSeconds)
      }
      let key = ObjectIdentifier(connection)
      sockets.withLock { $0[key] = socket }
      open.withLock { $0[key] = connection }
      // Closed in between: nobody will close this one; close it now.
      if closed.withLock({ $0 }) {
        close(connection)
        throw Self.closedError
      }
      connection.closeFuture.whenComplete { [weak self] _ in
        self?.open.withLock { _ = $0.removeValue(forKey: key) }
        self?.sockets.withLock { _ = $0.removeValue(forKey: key) }
        self?.sessions.withLock { _ = $0.removeValue(forKey: key) }
        let holder = self?.holders.withLock { $0.removeValue(forKey: key) }
        holder?.session?.lose("its connection to the server closed (a server restart, or the session was terminated)")
        // After the holder knows: a statement of its session that fails now reports the loss.
        Statements.connectionClosed(key)
      }
      return connection
    }

    /// Tells `session` when `connection` closes, until ``stopWatching(_:)``. One callback per
    /// connection, registered when it is made: a connection reused for grant after grant gathers
    /// no callbacks.
    func watch(_ connection: PostgresConnection, for session: HeldSession) {
      holders.withLock { $0[ObjectIdentifier(connection)] = WeakHolder(session: session) }
      // Closed before it was watched: the callback has already run.
      if connection.isClosed {
        holders.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
        session.lose("its connection to the server closed (a server restart, or the session was terminated)")
      }
    }

    func stopWatching(_ connection: PostgresConnection) {
      holders.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// The last of a container's work (a lease released in the background after the container
    /// was dropped) may give a connection back after the container's own `deinit`: it is closed
    /// here, as postgres-nio requires of every connection.
    deinit {
      closeIdle()
    }

    /// How many connections are open now.
    var openCount: Int { open.withLock { $0.count } }

    /// Leaves `connection` open past ``closeAll()``: its session now belongs to the processes
    /// that hold its socket (see ``HeldSession/leaveOpenUntilExit()``).
    func leaveOpen(_ connection: PostgresConnection) {
      open.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// The descriptor of `connection`'s socket in this process, while it is open: for a command
    /// that must hold the connection's session with this process (see
    /// ``HeldSession/leaveOpenUntilExit()``).
    func socketDescriptor(of connection: PostgresConnection) -> CInt? {
      sockets.withLock { $0[ObjectIdentifier(connection)] }
    }

    /// A socket to the server with TCP keepalives (and on Linux a user timeout): a waiter whose
    /// server host died learns it within about half the detection bound. Also returns the
    /// socket's descriptor. The socket is Liaison's own, close-on-exec from the start (see
    /// ``ConnectionSockets``), handed to NIO once connected.
    private func makeChannel(to configuration: PostgresConnection.Configuration, timeoutSeconds: Int) async throws
      -> (any Channel, CInt)
    {
      let timeout = timeoutSeconds
      let socket: CInt
      if let path = configuration.unixSocketPath {
        socket = try await ConnectionSockets.onThreadOfItsOwn { () throws(LiaisonError) in
          try ConnectionSockets.connect(toUnixSocket: path, timeoutSeconds: timeout)
        }
      } else {
        let host = configuration.host ?? "localhost"
        let port = configuration.port ?? 5432
        let options =
          [(level: SOL_SOCKET, name: SO_KEEPALIVE, value: CInt(1))]
          + Self.tcpOptions(timing).map { (level: CInt(IPPROTO_TCP), name: $0.0, value: CInt($0.1)) }
        socket = try await ConnectionSockets.onThreadOfItsOwn { () throws(LiaisonError) in
          try ConnectionSockets.connect(toHost: host, port: port, timeoutSeconds: timeout, options: options)
        }
      }
      // The channel owns the socket from here on, and closes it.
      return (try await ClientBootstrap(group: eventLoopGroup).withConnectedSocket(socket).get(), socket)
    }

    private static func tcpOptions(_ timing: DetectionTiming) -> [(CInt, Int)] {
      #if os(Linux)
        [
          (CInt(TCP_KEEPIDLE), timing.keepaliveIdle), (CInt(TCP_KEEPINTVL), timing.keepaliveInterval),
          (CInt(TCP_KEEPCNT), DetectionTiming.keepaliveCount),
          (CInt(TCP_USER_TIMEOUT), timing.serverUserTimeoutMilliseconds),
        ]
      #else
        [
          (CInt(TCP_KEEPALIVE), timing.keepaliveIdle), (CInt(TCP_KEEPINTVL), timing.keepaliveInterval),
          (CInt(TCP_KEEPCNT), DetectionTiming.keepaliveCount),
        ]
      #endif
    }

    /// An idle connection, or a new one.
    func take(before deadline: LiaisonClock.Instant? = nil) async throws(LiaisonError) -> PostgresConnection {
      try checkOpen()
      while let connection = idle.withLock({ $0.popLast() }) {
        if !connection.isClosed { return connection }
      }
      return try await connect(before: deadline)
    }

    /// Keeps `connection` for reuse: its session must hold nothing.
    func giveBack(_ connection: PostgresConnection) {
      guard !connection.isClosed else { return }
      let isClosed = closed.withLock { $0 }
      let kept = idle.withLock { idle -> Bool in
        guard !isClosed, idle.count < maximumIdle else { return false }
        idle.append(connection)
        return true
      }
      if !kept { close(connection) }
    }

    /// Closes `connection`, keeping it alive until it is closed (postgres-nio requires it).
    func close(_ connection: PostgresConnection) {
      connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    func closeIdle() {
      for connection in idle.withLock({ idle in
        defer { idle = [] }
        return idle
      }) { close(connection) }
    }

    /// Closes for good: refuses new connections and statements, ends every background task (and
    /// waits for it), ends every hold that is still held (as lost: its holder's code may be
    /// running under it), then closes every connection and waits until each is closed.
    func closeAll() async {
      // Leases first, while statements still run: their rows are freed, all at once, before
      // this returns (a lease taken from now on ends at once).
      let held = leasesClosed.withLock { closed in
        closed = true
        return leases.withLock { leases in
          defer { leases = [:] }
          return leases.values.compactMap(\.lease)
        }
      }
      await withTaskGroup(of: Void.self) { group in
        for lease in held { group.addTask { await lease.endForClose() } }
      }
      closed.withLock { $0 = true }
      await background.close()
      let sessions = holders.withLock { holders in
        defer { holders = [:] }
        return holders.values.compactMap(\.session)
      }
      for session in sessions { session.lose("its PostgresContainer was closed") }
      closeIdle()
      for connection in open.withLock({ Array($0.values) }) {
        try? await connection.close()
      }
    }

    /// Runs one statement on an idle connection, with the reply bounded by the detection timing:
    /// a connection that fails or stops answering is closed, never reused. `committing`: see
    /// ``run(_:on:within:logger:committing:)``; a new connection is made before `deadline` (see
    /// ``connect(before:)``).
    func query(
      _ query: PostgresQuery, doing what: String, committing: Bool = false,
      before deadline: LiaisonClock.Instant? = nil
    ) async throws(LiaisonError) -> [PostgresRow] {
      let connection = try await take(before: deadline)
      do {
        let rows = try await Self.run(
          query, on: connection, within: timing.replyTimeout, logger: logger, committing: committing)
        giveBack(connection)
        return rows
      } catch {
        close(connection)
        throw PostgresErrors.translate(error, doing: what)
      }
    }

    /// Runs one write statement on an idle connection, and returns once it has committed. With a
    /// `timeout`, the statement runs in a transaction whose `lock_timeout` is `timeout`: it waits
    /// at most that long for the rows other processes' writes hold, and then throws
    /// ``/Liaison/LiaisonError/Code/timedOut``, having written nothing. Without, it waits as long
    /// as they take (a dead server is still noticed within the detection bound).
    func write(_ query: PostgresQuery, doing what: String, timeout: Duration?) async throws(LiaisonError)
      -> [PostgresRow]
    {
      let connection = try await take()
      do {
        guard let timeout else {
          // No reply bound: a long transaction elsewhere is not an outage. A dead server or a cut
          // network is noticed by the connection's keepalives, within the detection bound.
          let rows = try await Self.run(query, on: connection, within: nil, logger: logger, committing: true)
          giveBack(connection)
          return rows
        }
        try await Self.begin(on: connection, lockTimeout: timeout, within: timing.replyTimeout, logger: logger)
        let rows = try await Self.run(query, on: connection, within: nil, logger: logger)
        _ = try await Self.run("COMMIT", on: connection, within: timing.replyTimeout, logger: logger)
        giveBack(connection)
        return rows
      } catch {
        close(connection)
        throw PostgresErrors.translate(error, doing: what, timeout: timeout)
      }
    }

    /// Begins a transaction on `connection`; with a `lockTimeout`, one whose waits for a row or
    /// table lock end after it (`SET LOCAL lock_timeout`, as a bound parameter), with
    /// PostgreSQL's `lock_not_available` (55P03).
    ///
    /// The transaction's commit is synchronous where the server's or role's `synchronous_commit`
    /// is `off` (``Durability``).
    static func begin(
      on connection: PostgresConnection, lockTimeout: Duration?, within limit: Duration?, logger: Logger
    ) async throws {
      _ = try await run("BEGIN", on: connection, within: limit, logger: logger)
      let settings: PostgresQuery =
        if let lockTimeout {
          "SELECT set_config('lock_timeout', \(lockTimeoutSetting(lockTimeout)), true), \(unescaped: Durability.raise)"
        } else {
          "SELECT \(unescaped: Durability.raise)"
        }
      _ = try await run(settings, on: connection, within: limit, logger: logger)
    }

    /// `timeout` as a `lock_timeout` setting, in milliseconds: at least 1 (0 would wait for ever).
    static func lockTimeoutSetting(_ timeout: Duration) -> String {
      String(max(1, min(Int64(Int32.max), Int64(timeout.clampedNanoseconds / 1_000_000))))
    }

    /// Runs `query` on `connection` and collects its rows; closes the connection (which fails
    /// the query) when no reply came within `limit`.
    ///
    /// `committing`: returns only once the statement's transaction has committed. postgres-nio
    /// reports a statement's end when the server sends its `CommandComplete`, which comes
    /// *before* the commit of the transaction it runs in on its own (the commit happens at the
    /// `Sync` after it): a server that stops in between loses a write whose statement seemed to
    /// succeed. The server runs the next statement on the connection only after that commit, so
    /// a statement after the write confirms it (``Durability/confirmation``, which also puts the
    /// commit on disk where the server commits asynchronously); if the confirmation does not
    /// come, the write may or may not have been made, and the error says so. Every write whose return promises that
    /// it happened (a send, an acknowledgement, a post) passes `true`. An exclusive grant does
    /// not: its fencing token is confirmed when it is asked for, by
    /// ``PostgresLockGuard/fencingToken()`` or by the session's next statement.
    static func run(
      _ query: PostgresQuery, on connection: PostgresConnection, within limit: Duration?, logger: Logger,
      committing: Bool = false
    ) async throws -> [PostgresRow] {
      let rows = try await runOne(query, on: connection, within: limit, logger: logger)
      guard committing else { return rows }
      do {
        _ = try await runOne(Durability.confirmation, on: connection, within: limit, logger: logger)
      } catch {
        throw LiaisonError(
          .unavailable,
          "The connection to the server ended before the server confirmed that a write was committed: it may or may "
            + "not have been made. Check, or make it again (a retried send with the same id stores nothing), once "
            + "the server answers.", cause: error)
      }
      return rows
    }

    /// One statement, which ends when its connection closes whatever postgres-nio does: a
    /// statement written as the connection closes is never answered by postgres-nio (its task
    /// never reaches the channel's handler), and would wait for ever.
    ///
    /// The reply bound is kept on the connection's event loop, where the reply is read: a reply
    /// read before the bound passed is an answer, however long this process's tasks then wait
    /// for a thread (a cooperative pool kept busy by other work). A timer on the task side would
    /// close a connection that did answer in time, and lose every lock its session held.
    private static func runOne(
      _ query: PostgresQuery, on connection: PostgresConnection, within limit: Duration?, logger: Logger
    ) async throws -> [PostgresRow] {
      let eventLoop = connection.eventLoop
      let answer = eventLoop.makePromise(of: [PostgresRow].self)
      Statements.failWhenClosed(answer, connection)
      let expired = Locked(false)
      if let limit {
        // The event loop's timer, on the kernel's clock: it must fire where the reply is read.
        let timer = eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: limit.clampedNanoseconds))) {
          expired.withLock { $0 = true }
          answer.fail(ChannelError.ioOnClosedChannel)
          _ = connection.close() as EventLoopFuture<Void>
        }
        answer.futureResult.whenComplete { _ in timer.cancel() }
      }
      let result: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: logger)
      // Whether the answer is in: set on the event loop, where it is read.
      let answered = Locked(false)
      result.whenComplete {
        answered.withLock { $0 = true }
        answer.completeWith($0.map { $0.rows })
      }
      do {
        // A cancelled task's statement ends its connection (as postgres-nio ends a cancelled
        // query's): the server ends the statement with the session, and nothing reuses the
        // connection mid-statement. Decided on the event loop: a statement whose answer is in
        // when the cancellation arrives has ended, and its connection is sound (closing it then
        // would hand a closing connection to whoever reuses it next).
        return try await withTaskCancellationHandler {
          try await answer.futureResult.get()
        } onCancel: {
          eventLoop.execute {
            guard !answered.withLock({ $0 }) else { return }
            answer.fail(CancellationError())
            _ = connection.close() as EventLoopFuture<Void>
          }
        }
      } catch {
        if let limit, expired.withLock({ $0 }) {
          throw LiaisonError(
            .unavailable,
            "The server did not answer within \(limit) (a cut network, or a server stopped or overloaded); the "
              + "connection was closed. Try again once the server answers.", cause: error)
        }
        throw error
      }
    }
  }

  /// What makes a write that returned survive a crash of the server whatever its settings: a
  /// server, database or role whose `synchronous_commit` is `off` commits asynchronously, and an
  /// immediate stop or a crash then loses the last commits (up to three times `wal_writer_delay`)
  /// although their statements returned. Liaison's writes never rely on that setting:
  ///
  /// - a transaction that Liaison begins (``Connector/begin(on:lockTimeout:within:logger:)``)
  ///   raises it to `on` for itself (``raise``);
  /// - a write in a transaction of its own is confirmed by ``confirmation``, which where the
  ///   setting is `off` commits a transaction of its own synchronously: its commit puts the log
  ///   on disk up to its own commit record, past the write's (the log is one for the whole
  ///   server, whichever session wrote it).
  ///
  /// Where the setting is `on` (PostgreSQL's default), `local` or stricter, both do nothing.
  /// Where it is `off`, each such write costs one transaction id and one small log record more,
  /// and a flush of the log.
  enum Durability {
    /// `synchronous_commit` set to `on` for the current transaction where it is `off`.
    static let raise =
      "CASE WHEN current_setting('synchronous_commit') = 'off' THEN set_config('synchronous_commit', 'on', true) END"

    /// The statement that confirms the commit of the write before it on the same connection and,
    /// where `synchronous_commit` is `off`, puts it on disk. A commit is synchronous only for a
    /// transaction that wrote to the log before it (a transaction id alone is not enough), so it
    /// then writes the smallest record there is: a logical decoding message (prefix `liaison`,
    /// which a decoder that does not know it skips; any role may write one).
    static let confirmation: PostgresQuery = """
      SELECT CASE WHEN current_setting('synchronous_commit') = 'off'
        THEN set_config('synchronous_commit', 'on', true) || pg_logical_emit_message(true, 'liaison', '')::text END
      """
  }

  /// The statements in flight, by connection: each ends with an error when its connection closes,
  /// even if postgres-nio never answers it. The connection's one close callback (registered when
  /// it is made, in ``Connector``) ends them, so that statements add no callbacks of their own.
  enum Statements {
    private struct Waiter: Sendable {
      let fail: @Sendable (any Error) -> Void
    }

    private struct Registry: Sendable {
      var inFlight: [ObjectIdentifier: [Int: Waiter]] = [:]
      var nextID = 0
    }

    private static let registry = Locked(Registry())

    /// Runs `body` (a statement on `connection`); throws as soon as the connection closes. The
    /// statement's task is cancelled when the caller's is.
    static func run<Result: Sendable>(
      on connection: PostgresConnection, _ body: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
      let key = ObjectIdentifier(connection)
      let id = registry.withLock { registry -> Int in
        registry.nextID += 1
        return registry.nextID
      }
      let resumed = Locked(false)
      let work = Locked<Task<Void, Never>?>(nil)
      return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
          @Sendable func finish(_ result: Swift.Result<Result, any Error>) {
            let first = resumed.withLock { resumed -> Bool in
              defer { resumed = true }
              return !resumed
            }
            guard first else { return }
            _ = registry.withLock { $0.inFlight[key]?.removeValue(forKey: id) }
            continuation.resume(with: result)
          }
          registry.withLock { $0.inFlight[key, default: [:]][id] = Waiter(fail: { finish(.failure($0)) }) }
          if connection.isClosed {
            finish(.failure(closed))
            return
          }
          work.withLock {
            $0 = Task {
              do {
                finish(.success(try await body()))
              } catch {
                finish(.failure(error))
              }
            }
          }
        }
      } onCancel: {
        work.withLock { $0 }?.cancel()
      }
    }

    /// Fails `promise` (a statement's answer on `connection`) as soon as the connection closes,
    /// at once if it has closed already.
    static func failWhenClosed<Value: Sendable>(_ promise: EventLoopPromise<Value>, _ connection: PostgresConnection) {
      let key = ObjectIdentifier(connection)
      let id = registry.withLock { registry -> Int in
        registry.nextID += 1
        registry.inFlight[key, default: [:]][registry.nextID] = Waiter(fail: { promise.fail($0) })
        return registry.nextID
      }
      promise.futureResult.whenComplete { _ in _ = registry.withLock { $0.inFlight[key]?.removeValue(forKey: id) } }
      if connection.isClosed { promise.fail(closed) }
    }

    private static let closed = LiaisonError(
      .unavailable,
      "The connection to the server closed (a server restart, a terminated session, or a connection given up "
        + "after no answer). Try again once the server answers.")

    /// Ends every statement in flight on the connection with the key `key`: it closed.
    static func connectionClosed(_ key: ObjectIdentifier) {
      let waiters = registry.withLock { $0.inFlight.removeValue(forKey: key) } ?? [:]
      for waiter in waiters.values { waiter.fail(closed) }
    }
  }

  /// The times that follow from the detection bound: how soon a dead peer is noticed.
  ///
  /// A holder that loses its network learns it within ``holderNotices`` (a heartbeat that gets
  /// no reply, at most about a third of the bound); the server ends its session, releasing its
  /// locks, after about half the bound (keepalives and `tcp_user_timeout`) — later, so that the
  /// cut-off holder knows first.
  struct DetectionTiming: Sendable {
    let bound: Duration
    static let keepaliveCount = 3

    init(bound: Duration) {
      self.bound = bound
    }

    private var boundSeconds: Double {
      Double(bound.components.seconds) + Double(bound.components.attoseconds) / 1e18
    }

    /// Seconds of silence before the server's first keepalive probe (at least 1).
    var keepaliveIdle: Int { max(1, Int(boundSeconds / 5)) }
    /// Seconds between the server's keepalive probes (at least 1).
    var keepaliveInterval: Int { max(1, Int(boundSeconds / 10)) }
    /// How long the server's kernel waits for an acknowledgement before dropping a connection.
    var serverUserTimeoutMilliseconds: Int { max(1000, Int(boundSeconds * 500)) }
    /// How often a held lock or claim checks its connection.
    var heartbeatInterval: Duration { bound / 7 }
    /// Seconds to wait for a connection to be set up (the TCP connection, then the startup
    /// handshake): generous, since setting up holds nothing, and a loaded server or client can
    /// take seconds to answer a handshake.
    var connectTimeoutSeconds: Int { max(30, Int(boundSeconds * 3)) }
    /// How long a statement waits for a reply before its connection is given up.
    var replyTimeout: Duration { bound / 5 }
    /// When the holder notices a silent connection, at the latest.
    var holderNotices: Duration { heartbeatInterval + replyTimeout }
    /// How long a lease lasts after each renewal (by the server's clock): a holder that stops
    /// renewing (dead, or cut off) lets others in after this long. The detection bound.
    var leaseLength: Duration { bound }
    /// How long the holder trusts its lease after it sent its last renewal that succeeded: well
    /// before the lease's end, so that a holder cut off learns of the loss before another can
    /// take it (the server renewed no earlier than the holder sent the renewal).
    var leaseTrusted: Duration { bound * 3 / 5 }
  }
#endif
