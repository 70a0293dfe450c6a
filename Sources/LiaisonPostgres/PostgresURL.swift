#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// Reads a `postgres://` (or `postgresql://`) URL into a postgres-nio configuration.
  enum PostgresURL {
    static func configuration(_ text: String) throws(LiaisonError) -> PostgresConnection.Configuration {
      func invalid(_ problem: String) -> LiaisonError {
        LiaisonError(
          .invalidArgument,
          "The PostgreSQL URL is not usable: \(problem). Write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, or "
            + "postgres://USER@/DATABASE?host=/path/to/socket-folder for a Unix socket.")
      }
      guard let components = URLComponents(string: text), let scheme = components.scheme,
        scheme == "postgres" || scheme == "postgresql"
      else { throw invalid("it does not start with postgres://") }
      guard let user = components.user, !user.isEmpty else { throw invalid("it names no user") }
      let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
      let parameters = Dictionary(
        (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
      if let unknown = parameters.keys.first(where: { !["host", "sslmode"].contains($0) }) {
        throw invalid("the parameter '\(unknown)' is not one Liaison reads (host, sslmode)")
      }
      if let socketFolder = parameters["host"], socketFolder.hasPrefix("/") {
        return PostgresConnection.Configuration(
          unixSocketPath: socketFolder + "/.s.PGSQL.\(components.port ?? 5432)", username: user,
          password: components.password, database: database.isEmpty ? nil : database)
      }
      guard let host = components.host, !host.isEmpty else { throw invalid("it names no host") }
      let tls: PostgresConnection.Configuration.TLS
      switch parameters["sslmode"] ?? "prefer" {
      case "disable":
        tls = .disable
      case "prefer", "require":
        let context: NIOSSLContext
        do {
          context = try NIOSSLContext(configuration: .makeClientConfiguration())
        } catch {
          throw LiaisonError(.system, "Could not set up TLS for the PostgreSQL connection: \(error).", cause: error)
        }
        tls = parameters["sslmode"] == "require" ? .require(context) : .prefer(context)
      case let mode:
        throw invalid("sslmode '\(mode)' is not one of disable, prefer, require")
      }
      return PostgresConnection.Configuration(
        host: host, port: components.port ?? 5432, username: user, password: components.password,
        database: database.isEmpty ? nil : database, tls: tls)
    }
  }
#endif
