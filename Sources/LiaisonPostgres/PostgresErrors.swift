#if Postgres
  import Liaison
  import PostgresNIO

  /// PostgreSQL's and postgres-nio's errors as ``/Liaison/LiaisonError``s that say what to do: the
  /// one place where they are translated.
  enum PostgresErrors {
    /// PostgreSQL's `lock_not_available`: a `lock_timeout` passed.
    static let lockNotAvailable = "55P03"
    /// PostgreSQL's `query_canceled`: a `statement_timeout` passed, or an operator cancelled.
    static let queryCanceled = "57014"

    /// The SQLSTATE of a server error, if `error` is one.
    static func sqlState(_ error: (any Error)?) -> String? {
      (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// The server's message, if `error` is a server error.
    static func serverMessage(_ error: (any Error)?) -> String? {
      (error as? PSQLError)?.serverInfo?[.message]
    }

    /// `error` as a ``/Liaison/LiaisonError``: a ``/Liaison/LiaisonError`` as it is; a
    /// cancellation (or any failure of a cancelled task: postgres-nio ends a cancelled statement
    /// by closing its connection) as ``/Liaison/LiaisonError/Code/cancelled``; a `lock_timeout`
    /// that passed (`timeout`: the one given) as ``/Liaison/LiaisonError/Code/timedOut``, nothing
    /// written; a lost connection as ``/Liaison/LiaisonError/Code/unavailable``.
    ///
    /// - Parameter what: what was being done, as "Could not …" continues it.
    static func translate(_ error: any Error, doing what: String, timeout: Duration? = nil) -> LiaisonError {
      if let error = error as? LiaisonError { return error }
      if error is CancellationError || Task.isCancelled { return .cancelled("trying to \(what)") }
      guard let psql = error as? PSQLError else {
        return LiaisonError(
          .unavailable, "Could not \(what): \(error). Check that the server runs and can be reached.", cause: error)
      }
      if let info = psql.serverInfo {
        let state = info[.sqlState] ?? "?"
        if state == lockNotAvailable {
          return LiaisonError(
            .timedOut,
            "Could not \(what): other processes' writes held the same rows longer than the timeout"
              + "\(timeout.map { " (\($0))" } ?? ""); nothing was written. Try again, or give a longer timeout.",
            cause: error)
        }
        let message = info[.message] ?? "no message"
        if state == queryCanceled, message.contains("statement timeout") {
          return LiaisonError(
            .timedOut,
            "Could not \(what): the server cancelled the statement when its statement_timeout passed (a setting of "
              + "the server, the database or the role, not Liaison's). Liaison's statements wait as long as their "
              + "own timeout says (a lock's wait, a write behind another's): set statement_timeout to 0 for Liaison's "
              + "role (ALTER ROLE … SET statement_timeout = 0), or longer than those waits.",
            cause: error)
        }
        // Class 57 (operator intervention: shutdown, terminated), 08 (connection exception).
        let code: LiaisonError.Code = state.hasPrefix("57") || state.hasPrefix("08") ? .unavailable : .system
        return LiaisonError(code, "Could not \(what): the server said \(message) (SQLSTATE \(state)).", cause: error)
      }
      switch psql.code {
      case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown:
        let detail = psql.underlying.map { " (\($0))" } ?? ""
        return LiaisonError(
          .unavailable,
          "Could not \(what): the connection to the server ended (\(psql.code))\(detail). Try again once the server "
            + "is back.",
          cause: error)
      default:
        return LiaisonError(.system, "Could not \(what): \(psql.code).", cause: error)
      }
    }

    /// Why connecting to one server failed, in a few words, for the error that lists every server
    /// tried; with ``passwordHint(_:passwordSource:)`` when the password was refused or missing.
    static func connectionFailure(_ error: any Error, passwordSource: String?) -> String {
      let reason: String
      if let error = error as? LiaisonError {
        reason = error.message
      } else if let psql = error as? PSQLError {
        if let info = psql.serverInfo {
          reason = "the server said \(info[.message] ?? "no message") (SQLSTATE \(info[.sqlState] ?? "?"))"
        } else {
          reason = "\(psql.code)" + (psql.underlying.map { " (\($0))" } ?? "")
        }
      } else if let failure = error as? NIOConnectionError, let first = failure.connectionErrors.first {
        reason = "\(first.error)"
      } else {
        reason = "\(error)"
      }
      return passwordHint(error, passwordSource: passwordSource).map { reason + " (\($0))" } ?? reason
    }

    /// Where the password came from, or how to give one, when `error` is a refused or missing
    /// password (SQLSTATE 28P01 or 28000, or a server that asks for a password when none was
    /// given), as a clause to add to a message; `nil` otherwise. Never the password itself.
    static func passwordHint(_ error: any Error, passwordSource: String?) -> String? {
      guard let psql = error as? PSQLError else { return nil }
      let refused = ["28P01", "28000"].contains(psql.serverInfo?[.sqlState] ?? "")
      guard refused || psql.code == .authMechanismRequiresPassword else { return nil }
      if let passwordSource { return "the password came from \(passwordSource)" }
      return "no password was given: put it in the password file (~/.pgpass or $PGPASSFILE, mode 0600), in "
        + "$PGPASSWORD, or in the URL"
    }

    /// Runs `body`, throwing what it throws as ``translate(_:doing:timeout:)`` makes it.
    static func typed<Result>(doing what: String, _ body: () async throws -> Result) async throws(LiaisonError)
      -> Result
    {
      do {
        return try await body()
      } catch {
        throw translate(error, doing: what)
      }
    }
  }
#endif
