#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonStore
  import LiaisonTestSupport
  import Testing

  /// Where a conformance test runs: the same test, on a folder or on PostgreSQL.
  enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case local
    case postgres
    /// PostgreSQL through a real PgBouncer in transaction mode, with `pool_mode=transaction`:
    /// locks and claims are leases, notifications are polled.
    case pooled

    var testDescription: String { rawValue }
  }

  /// A place for one test on one backend: the argument its peers get, and the place opened in the
  /// test's process. A PostgreSQL place gets a namespace of its own on the shared test server.
  struct BackendPlace: Sendable {
    let backend: Backend
    /// The peer's argument: a folder, or `URL#NAMESPACE`.
    let spec: String
    let namespace: String
    let server: PostgresTestServer?
    /// The URL the place opens (PostgreSQL, directly or through the pooler).
    let url: String?
    private let directory: TemporaryDirectory?

    /// The PgBouncer in transaction mode in front of the shared server, for every `pooled` place
    /// on it.
    static let sharedPooler: Result<PgBouncerTestServer, any Error> = Result {
      try PgBouncerTestServer.start(in: try PostgresTestServer.shared.get(), mode: .transaction)
    }

    /// Needs PostgreSQL to be installed for the `postgres` backend (``PostgresTestServer/mustRun``).
    static let postgresMessage: Comment = "needs PostgreSQL (apt-get install postgresql)"

    init(_ backend: Backend, server: PostgresTestServer? = nil, host: String? = nil, namespace: String? = nil) throws {
      self.backend = backend
      self.namespace = namespace ?? "test-\(UInt32.random(in: 0...UInt32.max))"
      switch backend {
      case .local:
        directory = TemporaryDirectory()
        self.server = nil
        url = nil
        spec = directory!.path
      case .postgres:
        directory = nil
        let server = try server ?? PostgresTestServer.shared.get()
        self.server = server
        url = Self.url(server, host: host)
        spec = url! + "#" + self.namespace
      case .pooled:
        directory = nil
        let pooler =
          try server.map { try PgBouncerTestServer.start(in: $0, mode: .transaction) }
          ?? Self.sharedPooler.get()
        self.server = try server ?? PostgresTestServer.shared.get()
        url = pooler.url + "&pool_mode=transaction"
        spec = url! + "#" + self.namespace
        self.pooler = pooler
        return
      }
      pooler = nil
    }

    /// The pooler a `pooled` place goes through.
    let pooler: PgBouncerTestServer?

    static func url(_ server: PostgresTestServer, host: String? = nil) -> String {
      (host.map { server.url(host: $0) } ?? server.url) + "?sslmode=disable"
    }

    /// The detection bound of the places opened here. Through the pooler, a lease is trusted for
    /// 0.6 of the bound after its renewal is sent: under Thread Sanitizer, with the whole suite
    /// running, a renewal has taken longer than the 6 s that the default 10 s bound trusts, and the
    /// lease was rightly given up. The places here are never killed, so a longer bound costs no
    /// test time.
    private var detectionBound: Duration {
      backend == .pooled ? .seconds(30) : PostgresContainer.Configuration().detectionBound
    }

    /// The place, opened in this process.
    func open(detectionBound: Duration? = nil) async throws -> any CoordinationPlace {
      switch backend {
      case .local: return try SharedContainer(directory: spec)
      case .postgres, .pooled:
        return try await PostgresContainer(
          url: url!, namespace: namespace, configuration: .init(detectionBound: detectionBound ?? self.detectionBound))
      }
    }

    /// The place with its stored parts, opened in this process: the same protocol family on
    /// either backend.
    func openStore(
      encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
      decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) async throws -> any CoordinationStore {
      switch backend {
      case .local: return try SharedContainer(directory: spec, encoder: encoder, decoder: decoder)
      case .postgres, .pooled:
        return try await PostgresContainer(
          url: url!, namespace: namespace,
          configuration: .init(detectionBound: detectionBound, encoder: encoder, decoder: decoder))
      }
    }

    /// A peer process on the place.
    func peer(environment: [String: String]? = nil, launcher: @escaping ([String]) -> [String] = { $0 }) throws
      -> Peer
    {
      try Peer(container: spec, environment: environment, launcher: launcher)
    }

    /// Whether the peer `pid` waits for the lock `name`: asleep in the kernel (a folder), or in
    /// the server's lock queue (PostgreSQL). A lease's waiter (`pooled`) tries again every poll
    /// interval and leaves no trace between tries: it counts as waiting once its process runs
    /// (a test then shows what it shows whether or not its first try came before).
    func waits(_ pid: Int32, for name: String) throws -> Bool {
      switch backend {
      case .local:
        return try KernelLocks.hasBlockedWaiter(pid: pid)
      case .pooled:
        return kill(pid, 0) == 0
      case .postgres:
        let count = try server!.psql(
          """
          SELECT count(*) FROM pg_locks l JOIN liaison.lock k ON l.objid = k.id::oid
          WHERE l.locktype = 'advisory' AND NOT l.granted AND k.namespace = '\(namespace)' AND k.name = '\(name)'
          """)
        return Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0
      }
    }
  }

  /// Reads the monotonic time at the end of a peer's answer (`… NS`).
  func timestamp(_ answer: String) throws -> UInt64 {
    try #require(UInt64(answer.split(separator: " ").last ?? ""), "no time in '\(answer)'")
  }

  /// Milliseconds from `start` to `end` (monotonic ns).
  func milliseconds(from start: UInt64, to end: UInt64) -> Double {
    end >= start ? Double(end - start) / 1e6 : -Double(start - end) / 1e6
  }
#endif
