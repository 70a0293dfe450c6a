#if Postgres
  import Liaison
  import PostgresNIO

  /// PostgreSQL's and postgres-nio's errors as ``/Liaison/LiaisonError``s that say what to do.
  enum PostgresErrors {
    /// The SQLSTATE of a server error, if `error` is one.
    static func sqlState(_ error: (any Error)?) -> String? {
      (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// The server's message, if `error` is a server error.
    static func serverMessage(_ error: (any Error)?) -> String? {
      (error as? PSQLError)?.serverInfo?[.message]
    }

    static func translate(_ error: any Error, doing what: String) -> any Error {
      if error is CancellationError || error is LiaisonError { return error }
      guard let psql = error as? PSQLError else {
        return LiaisonError(
          .unavailable, "Could not \(what): \(error). Check that the server runs and can be reached.", cause: error)
      }
      if let info = psql.serverInfo {
        let state = info[.sqlState] ?? "?"
        let message = info[.message] ?? "no message"
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
  }
#endif
