#if Postgres
  import Liaison
  import PostgresNIO

  extension Connector {
    /// Refuses an endpoint that hands a connection's session to other clients between
    /// transactions: a pooler in transaction or statement mode (PgBouncer, Supavisor, RDS
    /// Proxy). Liaison's locks, claims and `LISTEN`s live in the session of one connection;
    /// through such a pooler they would belong to whichever client gets the session next.
    ///
    /// A connection of this process learns which session (backend) its statements run in; then
    /// other connections take a session each and keep it, each in a transaction, and both are
    /// asked again, up to ``sessionCheckRounds`` times. Each connection of a server has a session
    /// of its own for as long as it is open, so the first's never changes and no other sees it.
    /// A transaction pooler gives each transaction any idle session: the first's, given back
    /// after its statement, is idle, and is handed out before any new one is opened. With the
    /// most recently used one first (PgBouncer's default), the next transaction gets it; in turn
    /// (`server_round_robin`), the first's next statement gets another; either way it shows
    /// within two rounds, since the other connections keep theirs. (A single check of two
    /// connections passed every time in turn with two idle sessions.) A pooler in session mode
    /// keeps a session per client connection, as a server does, and passes.
    ///
    /// With leases (``holdsAreLeases``), no session needs to be its own; only a statement pooler,
    /// which refuses transactions, is refused.
    func checkSessionsAreOwn() async throws(LiaisonError) {
      if holdsAreLeases {
        try await checkTransactionsRun()
        return
      }
      let first = try await connect()
      var others: [PostgresConnection] = []
      do {
        let session = try await backend(of: first)
        for _ in 0..<Self.sessionCheckRounds {
          let other = try await connect()
          others.append(other)
          do {
            _ = try await Self.run("BEGIN", on: other, within: timing.replyTimeout, logger: quietLogger)
          } catch let error as PSQLError
            where error.serverInfo?[.message]?.contains("not allowed in statement pooling mode") == true
          {
            throw Self.sharedSessions  // PgBouncer in statement mode refuses transactions
          }
          let otherSession = try await backend(of: other)
          let firstSession = try await backend(of: first)
          if otherSession == session || firstSession != session { throw Self.sharedSessions }
        }
        giveBack(first)
        // Closed, not kept: the check's connections are not what the container goes on to need.
        for other in others { close(other) }
      } catch let error as LiaisonError {
        close(first)
        for other in others { close(other) }
        throw error
      } catch {
        close(first)
        for other in others { close(other) }
        throw PostgresErrors.translate(error, doing: "check that each connection has a session of its own")
      }
    }

    /// How many other connections ``checkSessionsAreOwn()`` holds a session with, at most: two
    /// show either way of handing out idle sessions, with one idle session or more (the first
    /// round, unless there are exactly two in turn: the second).
    static let sessionCheckRounds = 2

    /// Refuses an endpoint that refuses transactions (a pooler in statement mode).
    private func checkTransactionsRun() async throws(LiaisonError) {
      let connection = try await connect()
      do {
        _ = try await Self.run("BEGIN", on: connection, within: timing.replyTimeout, logger: quietLogger)
        _ = try await Self.run("ROLLBACK", on: connection, within: timing.replyTimeout, logger: quietLogger)
        giveBack(connection)
      } catch let error as PSQLError
        where error.serverInfo?[.message]?.contains("not allowed in statement pooling mode") == true
      {
        close(connection)
        throw Self.statementPooler
      } catch {
        close(connection)
        throw PostgresErrors.translate(error, doing: "check that the server runs transactions")
      }
    }

    /// The error for a pooler in statement mode, with `pool_mode=transaction`.
    static let statementPooler = LiaisonError(
      .invalidArgument,
      "The server at this address refuses transactions: it is a pooler in statement mode. Liaison's leases and "
        + "writes run transactions of several statements. Use the pooler in transaction or session mode, or "
        + "connect to the server directly.")

    /// The process id of the server's backend that runs `connection`'s statement now.
    private func backend(of connection: PostgresConnection) async throws -> Int32 {
      let rows = try await Self.run(
        "SELECT pg_backend_pid()", on: connection, within: timing.replyTimeout, logger: quietLogger)
      return try rows.first!.decode(Int32.self)
    }

    /// The error for an endpoint that shares sessions between clients.
    static let sharedSessions = LiaisonError(
      .invalidArgument,
      "The server at this address hands a connection's session to other clients between transactions: it is a "
        + "pooler in transaction or statement mode (PgBouncer, Supavisor, RDS Proxy). Liaison's locks, claims and "
        + "notifications live in a session of their own, which such a pooler would share. Connect to the server "
        + "directly (its own host and port), or through the pooler in session mode, or add pool_mode=transaction "
        + "to the URL: locks and claims are then leases renewed in short transactions (a dead holder is noticed "
        + "within the detection bound), and notifications are polled.")
  }
#endif
