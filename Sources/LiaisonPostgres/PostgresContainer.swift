#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// A place in a PostgreSQL database where processes on any number of hosts coordinate: the
  /// analogue of ``/Liaison/SharedContainer`` for a fleet. Its locks, presences and signals have the local
  /// ones' names and meanings (see ``/Liaison/CoordinationPlace``), with two differences the network
  /// brings: a hold ends when its connection does (``/Liaison/HeldLock/loss``), and a dead peer is noticed
  /// within the **detection bound** rather than at once.
  ///
  /// ```swift
  /// let place = try await PostgresContainer(url: "postgres://app@db.internal/app", namespace: "billing")
  /// try await place.lock("nightly-report").withLock {
  ///   // … once at a time across the fleet
  /// }
  /// ```
  ///
  /// **Lifetime.** The container owns its connections and its background work (its listening
  /// connection, the heartbeats of held locks and claims, the release of a guard, claim or
  /// receiver dropped without being released). ``close()`` ends all of them and waits until they
  /// have ended; after it, every operation throws ``/Liaison/LiaisonError/Code/closed``. Close a
  /// container before dropping it: one dropped open closes its idle connections without waiting.
  ///
  /// Two applications in one database never collide when their namespaces differ. Everything
  /// lives in the schema `liaison`, created on first use (under a lock, so that processes
  /// starting together do not race). Each held lock or claim uses a connection of its own that
  /// nothing else shares. Through a connection pooler in transaction mode (PgBouncer), which
  /// would break session locks and `LISTEN`, add `pool_mode=transaction` to the URL: locks and
  /// claims are then leases, and notifications are polled (see <doc:MovingToSeveralMachines>).
  public final class PostgresContainer: Sendable {
    /// The namespace: names of locks, presences and signals are unique within it.
    public let namespace: LiaisonName
    /// How soon a dead peer is noticed (``Configuration/detectionBound``).
    public let detectionBound: Duration
    let connector: Connector
    let listener: Listener
    /// Tells this container's own posts apart from other processes'.
    let senderID: UInt64
    let host: String
    /// Makes the encoder of the payloads and values given as `Encodable`.
    let makeEncoder: @Sendable () -> JSONEncoder
    /// Makes the decoder of the payloads and values read as `Decodable`.
    let makeDecoder: @Sendable () -> JSONDecoder
    /// The defaults handle of each domain in use: one per domain, so that its cache and its
    /// subscription are the container's (see ``defaults(_:)``).
    let defaultsHandles = Locked<[LiaisonName: WeakDefaults]>([:])
    /// The turns of this process's tasks that wait for the same lock (``WaitingTurns``).
    var lockTurns: WaitingTurns { connector.lockTurns }

    struct WeakDefaults: @unchecked Sendable {
      weak var defaults: PostgresDefaults?
    }

    /// Opens the place at a `postgres://` URL, read with libpq's conventions, as `psql` reads it.
    ///
    /// ```swift
    /// // The password from ~/.pgpass or $PGPASSWORD; the first of two servers that takes writes.
    /// let place = try await PostgresContainer(
    ///   url: "postgres://app@db1,db2/app?target_session_attrs=read-write", namespace: "billing")
    /// ```
    ///
    /// The URL is `postgres://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]...]][/DATABASE][?PARAMETERS]`;
    /// HOST may be a Unix socket's folder, percent-encoded, or given as `?host=/var/run/postgresql`.
    /// The parameters read are `host`, `port`, `user`, `password`, `dbname`, `sslmode`,
    /// `sslrootcert`, `sslcert`, `sslkey`, `application_name`, `fallback_application_name`,
    /// `connect_timeout` and `target_session_attrs`, and Liaison's own `pool_mode`; any other is
    /// refused.
    ///
    /// What the URL leaves out comes, as in libpq, from `PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`, `PGAPPNAME`,
    /// `PGCONNECT_TIMEOUT` and `PGTARGETSESSIONATTRS`
    /// (the URL wins over them; an empty variable counts as unset), then from the defaults: the
    /// name of the user this process runs as, a database of that name, port 5432, and the Unix
    /// socket folder `/var/run/postgresql` on Linux (Debian's), `/tmp` elsewhere. So
    /// `postgres://` alone connects as `psql` with no arguments would.
    ///
    /// - **Password**: the URL's, else `PGPASSWORD`, else the matching line of the password file
    ///   (`~/.pgpass`, or the file `PGPASSFILE` names: `hostname:port:database:username:password`,
    ///   `*` for any, `\:` and `\\` to escape). Put it in the file rather than in the URL, which
    ///   shows in `ps` and shell history. A password file with any permission for its group or
    ///   others is refused with libpq's message ("password file … has group or world access;
    ///   permissions should be u=rw (0600) or less"), where libpq would skip it; so is one owned
    ///   by another user. A missing file, or one that is not a regular file, is passed over.
    /// - **`application_name`**: what `pg_stat_activity` shows for the container's connections;
    ///   `liaison` unless the URL or `PGAPPNAME` names one.
    /// - **`connect_timeout`**: seconds to wait for each server (at least 2); without it, or with
    ///   0, 30 seconds or three detection bounds, whichever is longer.
    /// - **Several hosts** (`h1:5432,h2:5433`, or comma lists in `host`, `PGHOST`, `PGPORT`): tried
    ///   in order for every connection. `target_session_attrs` says what a server must be to be
    ///   taken, checked after connecting: `any` (the default), `read-write`, `read-only`,
    ///   `primary`, `standby` or `prefer-standby`. When none fits, the error names each server
    ///   and why it was passed over. Give `read-write` when the hosts are a primary and its
    ///   standbys: locks taken on two different servers do not exclude each other.
    /// - **`pool_mode`**: `session` (the default) or `transaction`, for a pooler in transaction
    ///   mode: locks and claims become leases renewed in short transactions (a dead holder is
    ///   passed over within the detection bound, not at once), and notifications are polled
    ///   every 250 ms. Without it, such a pooler is refused when the container opens.
    /// - **TLS**, chosen as libpq chooses it:
    ///   - `sslmode`: `disable`; `allow` or `prefer` (the default: TLS when the server offers it);
    ///     `require` (always TLS); `verify-ca` (and the server's certificate signed by a trusted
    ///     root); `verify-full` (and naming HOST). Only `verify-ca` and `verify-full` check the
    ///     certificate, unless a root is given: then `prefer` and `require` check it as `verify-ca`.
    ///   - `sslrootcert=PATH`: the trusted roots (PEM), such as a managed service's CA bundle;
    ///     `system` for the system's (with `verify-full` only). Without it, `~/.postgresql/root.crt`.
    ///   - `sslcert=PATH` and `sslkey=PATH`: a client certificate and its key (PEM, no
    ///     passphrase, mode 0600); without them, `~/.postgresql/postgresql.crt` and `.key` when
    ///     they exist.
    ///
    /// - Parameters:
    ///   - url: where the server is, and who connects.
    ///   - namespace: the namespace of the place's names (see ``namespace``).
    ///   - configuration: the detection bound, logger, idle connections, event loops and coders
    ///     (``Configuration``; its defaults when left out).
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` for a URL (or a variable) that
    ///   cannot be read, a configuration out of its range, or a TLS file that is missing or not PEM (`verify-ca` or `verify-full`
    ///   without a root certificate included), or an endpoint that shares sessions between clients
    ///   (a pooler in transaction mode, without `pool_mode=transaction`; in statement mode,
    ///   always); ``/Liaison/LiaisonError/Code/unsafeFile`` for a password
    ///   file or key file that others may read; ``/Liaison/LiaisonError/Code/invalidName`` for a
    ///   namespace that breaks the naming rule; ``/Liaison/LiaisonError/Code/unavailable`` when no
    ///   server can be reached or the TLS handshake fails (the message says why: an untrusted
    ///   certificate, a host name it does not name, a client certificate refused); and
    ///   ``/Liaison/LiaisonError/Code/incompatibleSchema`` when a later version of Liaison set up
    ///   the database's schema and this one cannot use it (see <doc:MovingToSeveralMachines>).
    public convenience init(
      url: String, namespace: String, configuration: Configuration = Configuration()
    ) async throws(LiaisonError) {
      try await self.init(url: url, environment: .current, namespace: namespace, configuration: configuration)
    }

    /// Opens the place at `url`, read with `environment` rather than this process's (the tests'
    /// form of ``init(url:namespace:configuration:)``).
    convenience init(
      url: String, environment: ConnectionEnvironment, namespace: String, configuration: Configuration = Configuration()
    ) async throws(LiaisonError) {
      try await self.init(
        targets: try PostgresURL(url, environment: environment).connectionTargets(), namespace: namespace,
        configuration: configuration)
    }

    /// Opens the place with a postgres-nio connection configuration: where the server is, and who
    /// connects. Liaison adds its keepalive settings to the startup parameters, and
    /// `application_name=liaison` unless they name one.
    public convenience init(
      connection: PostgresConnection.Configuration, namespace: String, configuration: Configuration = Configuration()
    ) async throws(LiaisonError) {
      try await self.init(
        targets: ConnectionTargets(targets: [ConnectionTarget(configuration: connection)]), namespace: namespace,
        configuration: configuration)
    }

    /// Opens the place on the first of `targets` that fits.
    init(targets: ConnectionTargets, namespace: String, configuration: Configuration) async throws(LiaisonError) {
      try configuration.check()
      self.namespace = try LiaisonName(namespace)
      detectionBound = configuration.detectionBound
      connector = Connector(
        targets: targets, timing: DetectionTiming(bound: configuration.detectionBound), logger: configuration.logger,
        maximumIdle: configuration.maximumIdleConnections, eventLoopGroup: configuration.eventLoopGroup,
        clock: configuration.clock)
      senderID = UInt64.random(in: 1...UInt64.max)
      host = ProcessInfo.processInfo.hostName
      listener = Listener(connector: connector)
      makeEncoder = configuration.encoder
      makeDecoder = configuration.decoder
      do {
        try await connector.checkSessionsAreOwn()
        try await Schema.create(connector)
      } catch {
        await connector.closeAll()
        throw PostgresErrors.translate(error, doing: "set up Liaison's tables")
      }
    }

    /// The safety net of a container dropped without ``close()``: its idle connections are
    /// closed, without waiting.
    deinit {
      listener.stop()
      connector.closeIdle()
    }

    /// Closes the container: ends its background work and every connection it owns, and waits
    /// until they have ended. Locks and claims still held are lost (their connections close, so
    /// the server releases them at once), and receivers end. Afterwards every operation throws
    /// ``/Liaison/LiaisonError/Code/closed``. Calling it again does nothing.
    public func close() async {
      listener.stop()
      await connector.closeAll()
    }

    /// Whether locks and claims are leases (the URL's `pool_mode=transaction`).
    package var holdsAreLeases: Bool { connector.holdsAreLeases }

    /// How many background tasks and connections the container has now: what ``close()`` ends.
    package var activity: (backgroundTasks: Int, connections: Int) {
      (connector.background.count, connector.openCount)
    }

    /// How many watches (of signals, domains and presences) the container has in place now.
    package var liveWatchCount: Int { listener.subscriberCount }

    /// The lock called `name` (see ``/Liaison/LiaisonName`` for the rule names follow).
    public func lock(_ name: String) throws(LiaisonError) -> PostgresLock {
      PostgresLock(container: self, name: try LiaisonName(name))
    }

    /// The presence called `name`.
    public func presence(_ name: String) throws(LiaisonError) -> PostgresPresence {
      PostgresPresence(container: self, name: try LiaisonName(name))
    }

    /// The signal called `name`.
    public func signal(_ name: String) throws(LiaisonError) -> PostgresSignal {
      PostgresSignal(container: self, name: try LiaisonName(name))
    }

    /// Every presence of the namespace that has ever been claimed, by name (the `liaison presence
    /// list` command).
    package func presences() async throws(LiaisonError) -> [PostgresPresence] {
      let rows = try await query(
        "SELECT name FROM liaison.presence WHERE namespace = \(namespace.rawValue) ORDER BY name",
        doing: "list the presences")
      return rows.compactMap { row in
        guard let text = try? row.decode(String.self, context: .default), let name = try? LiaisonName(text) else {
          return nil  // another program's row
        }
        return PostgresPresence(container: self, name: name)
      }
    }

    /// Every signal of the namespace that has been posted or set, by name, with its state (the
    /// `liaison status` command). Rows whose name breaks the naming rule (another program's) are
    /// left out.
    package func signalStates() async throws(LiaisonError) -> [(name: LiaisonName, state: UInt64)] {
      let rows = try await query(
        "SELECT name, state FROM liaison.signal WHERE namespace = \(namespace.rawValue) ORDER BY name",
        doing: "list the signals")
      return rows.compactMap { row in
        guard let (text, state) = try? row.decode((String, Int64).self, context: .default),
          let name = try? LiaisonName(text)
        else { return nil }
        return (name, UInt64(bitPattern: state))
      }
    }

    /// Runs one statement on a connection that holds nothing (the tests prepare and read their
    /// tables with it). `committing`: returns only once a write has committed (see
    /// ``Connector/run(_:on:within:logger:committing:)``).
    package func query(_ query: PostgresQuery, doing what: String, committing: Bool = false)
      async throws(LiaisonError) -> [PostgresRow]
    {
      try await connector.query(query, doing: what, committing: committing)
    }
  }

  extension PostgresContainer {
    /// How a container behaves, beyond where it connects: each setting has a default, so give
    /// only what differs.
    ///
    /// ```swift
    /// let place = try await PostgresContainer(
    ///   url: "postgres://app@db.internal/app", namespace: "billing",
    ///   configuration: .init(detectionBound: .seconds(5), logger: logger))
    /// ```
    public struct Configuration: Sendable {
      /// How soon a dead peer is noticed (10 seconds by default, at least 2). A holder whose host
      /// dies or whose network is cut loses its locks and claims within this bound (the server
      /// ends its session); a waiter then takes the lock, and an observer sees the presence
      /// released. The cut-off holder learns of the loss earlier than the server lets another
      /// process in. A holder that is killed, or that closes its connection, is noticed at once.
      /// Smaller bounds cost more heartbeats: one round trip per held lock or claim every seventh
      /// of the bound.
      public var detectionBound: Duration
      /// postgres-nio's logger, and the one of failures in the container's background work
      /// (by default, critical messages only).
      public var logger: Logger
      /// How many idle connections are kept for reuse (8 by default, at least 0).
      public var maximumIdleConnections: Int
      /// The SwiftNIO event loops of the container's connections: the application's own, or
      /// postgres-nio's shared group (the default). The container neither starts nor shuts it
      /// down. (It takes no `PostgresClient`: a pool lends a connection for a closure, while a
      /// lock's session must last as long as it is held.)
      public var eventLoopGroup: any EventLoopGroup
      /// Makes the `JSONEncoder` of values and payloads (a date or key strategy).
      public var encoder: @Sendable () -> JSONEncoder
      /// Makes the `JSONDecoder` that reads them back.
      public var decoder: @Sendable () -> JSONDecoder
      /// The clock of the container's timed decisions (a manual one in the tests).
      package var clock: LiaisonClock = .system

      /// The settings given, and the defaults for the others.
      public init(
        detectionBound: Duration = .seconds(10), logger: Logger = Configuration.quietLogger,
        maximumIdleConnections: Int = 8,
        eventLoopGroup: any EventLoopGroup = PostgresConnection.defaultEventLoopGroup,
        encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
      ) {
        self.detectionBound = detectionBound
        self.logger = logger
        self.maximumIdleConnections = maximumIdleConnections
        self.eventLoopGroup = eventLoopGroup
        self.encoder = encoder
        self.decoder = decoder
      }

      /// The default logger: postgres-nio's messages and those of the container's background
      /// work, at level `critical` only.
      public static var quietLogger: Logger {
        var logger = Logger(label: "liaison.postgres")
        logger.logLevel = .critical
        return logger
      }

      /// Throws ``/Liaison/LiaisonError/Code/invalidArgument`` for a setting out of its range.
      func check() throws(LiaisonError) {
        guard detectionBound >= .seconds(2) else {
          throw LiaisonError(
            .invalidArgument,
            "The detection bound \(detectionBound) is too short: give 2 seconds or more (the default is 10 seconds).")
        }
        guard maximumIdleConnections >= 0 else {
          throw LiaisonError(
            .invalidArgument,
            "The maximum number of idle connections is \(maximumIdleConnections): give 0 or more (the default is 8).")
        }
      }
    }
  }

  extension PostgresContainer: CoordinationStore {
    public typealias LockType = PostgresLock
    public typealias PresenceType = PostgresPresence
    public typealias SignalType = PostgresSignal
    public typealias DefaultsType = PostgresDefaults
    public typealias MailboxType = PostgresMailbox
  }
#endif
