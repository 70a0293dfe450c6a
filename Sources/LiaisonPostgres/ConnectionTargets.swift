#if Postgres
  import Liaison
  import PostgresNIO

  /// The servers a container connects to, tried in order, and what a server must be to be
  /// taken: what a URL with several hosts (`postgres://u@h1,h2/db`) and
  /// `target_session_attrs` describe.
  struct ConnectionTargets: Sendable {
    /// The servers, in the order they are tried; never empty.
    var targets: [ConnectionTarget]
    /// What a server must be (libpq's `target_session_attrs`).
    var sessionAttributes: TargetSessionAttributes = .any
    /// Seconds to wait for each server (libpq's `connect_timeout`); `nil` for Liaison's own
    /// bound, which follows from the detection bound.
    var connectTimeoutSeconds: Int?
    /// Whether locks and claims are leases: rows with an expiry that the holder renews in short
    /// transactions, rather than advisory locks held by a session of their own; and whether
    /// notifications are polled rather than `LISTEN`ed for. What a pooler in transaction mode
    /// needs (the URL's `pool_mode=transaction`), since it hands a session to another client
    /// after every transaction.
    var holdsAreLeases = false
  }

  /// One server to connect to.
  struct ConnectionTarget: Sendable {
    /// How to connect to it.
    var configuration: PostgresConnection.Configuration
    /// How errors name it: `db1:5432`, `[::1]:5432`, or a socket's path.
    var name: String
    /// Where its password came from, for the error of a failed authentication: `the URL`,
    /// `$PGPASSWORD`, `the password file "PATH"`; `nil` when none was given.
    var passwordSource: String?

    init(configuration: PostgresConnection.Configuration, passwordSource: String? = nil) {
      self.configuration = configuration
      self.passwordSource = passwordSource
      if let path = configuration.unixSocketPath {
        name = path
      } else {
        let host = configuration.host ?? "localhost"
        name = (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.port ?? 5432)"
      }
    }
  }

  /// libpq's `target_session_attrs`: which of the servers a connection may go to, judged on each
  /// server after connecting.
  enum TargetSessionAttributes: String, CaseIterable, Sendable {
    /// The first server that answers.
    case any
    /// A server that takes writes (`transaction_read_only` is off): a primary not set read-only.
    case readWrite = "read-write"
    /// A server that refuses writes (a standby, or a primary set read-only).
    case readOnly = "read-only"
    /// A server not in recovery (`pg_is_in_recovery()` is false).
    case primary
    /// A server in recovery: a standby.
    case standby
    /// A standby if any answers, else any server.
    case preferStandby = "prefer-standby"

    /// Whether the server's state must be read after connecting.
    var needsCheck: Bool { self != .any }

    /// Why a server that is `inRecovery` and `readOnly` does not fit, or `nil` when it does; on
    /// the second pass of `prefer-standby` (`fallback`), every server fits.
    func mismatch(inRecovery: Bool, readOnly: Bool, fallback: Bool) -> String? {
      switch self {
      case .any: return nil
      case .readWrite: return readOnly ? "the server is read-only (transaction_read_only is on)" : nil
      case .readOnly: return readOnly ? nil : "the server takes writes (transaction_read_only is off)"
      case .primary: return inRecovery ? "the server is a standby (in recovery)" : nil
      case .standby: return inRecovery ? nil : "the server is not a standby (not in recovery)"
      case .preferStandby:
        return fallback || inRecovery ? nil : "the server is not a standby (not in recovery)"
      }
    }
  }
#endif
