#if Postgres
  import Liaison
  import PostgresNIO

  extension Connector {
    /// Refuses an endpoint that hands a connection's session to other clients between
    /// transactions: a pooler in transaction or statement mode (PgBouncer, Supavisor, RDS
    /// Proxy). Liaison's locks, claims and `LISTEN`s live in the session of one connection;
    /// through such a pooler they would belong to whichever client gets the session next.
    ///
    /// Two connections of this process ask the server which session (backend) they run in: the
    /// first outside a transaction, then the second inside one, then the first again. Each
    /// connection of a server has a session of its own for as long as it is open, so the two
    /// differ and the first's stays the same. A transaction pooler gives the second the session
    /// the first has just given back (PgBouncer hands out its most recently used one first), or
    /// the first another one: either shows. A pooler in session mode keeps a session per client
    /// connection, as a server does, and passes.
    ///
    /// With leases (``holdsAreLeases``), no session needs to be its own; only a statement pooler,
    /// which refuses transactions, is refused.
    func checkSessionsAreOwn() async throws(LiaisonError) {
      if holdsAreLeases {
        try await checkTransactionsRun()
        return
      }
      let first = try await connect()
      let second: PostgresConnection
      do {
        second = try await connect()
      } catch {
        close(first)
        throw error
      }
      do {
        let before = try await backend(of: first)
        do {
          _ = try await Self.run("BEGIN", on: second, within: timing.replyTimeout, logger: quietLogger)
        } catch let error as PSQLError
          where error.serverInfo?[.message]?.contains("not allowed in statement pooling mode") == true
        {
          throw Self.sharedSessions  // PgBouncer in statement mode refuses transactions
        }
        let other = try await backend(of: second)
        let after = try await backend(of: first)
        _ = try await Self.run("ROLLBACK", on: second, within: timing.replyTimeout, logger: quietLogger)
        giveBack(first)
        giveBack(second)
        if other == before || after != before { throw Self.sharedSessions }
      } catch let error as LiaisonError {
        close(first)
        close(second)
        throw error
      } catch {
        close(first)
        close(second)
        throw PostgresErrors.translate(error, doing: "check that each connection has a session of its own")
      }
    }

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
