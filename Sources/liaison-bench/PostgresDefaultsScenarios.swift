// The shared-defaults scenarios of `liaison-bench postgres`: a PostgresDefaults's get, set and
// visibility across processes, each beside the same SQL statements sent through a bare
// postgres-nio connection (the floor), in the same run on the same server.

import Foundation

#if Postgres
  import Liaison
  import LiaisonPostgres
  import PostgresNIO

  enum PostgresDefaultsScenarios {
    static let stamp = DefaultsKey<UInt64>("stamp")
    /// The raw floors' domain, in the bench's namespace.
    static let rawDomain = "bench-raw-defaults"

    static func run(
      _ container: PostgresContainer, _ raw: PostgresConnection, url: String, namespace: String
    ) throws -> [ScenarioResult] {
      [
        try get(container, raw, namespace: namespace),
        try set(container, raw, namespace: namespace),
        try visibility(container, raw, url: url, namespace: namespace),
      ]
    }

    /// `pg.defaults.get`: a `get` of a key nobody else writes, served from this process's
    /// cache, against the statement it would send otherwise (`pg.raw.defaults-read`, the value
    /// and the domain's generation in one snapshot) and a bare `SELECT 1`.
    static func get(_ container: PostgresContainer, _ raw: PostgresConnection, namespace: String) throws
      -> ScenarioResult
    {
      let defaults = try blocking { try await container.defaults("bench-get") }
      try blocking {
        try await defaults.set(42, for: stamp)
        _ = try await defaults.get(stamp)
        try await rawWrite(raw, namespace: namespace, value: 42, notifying: "liaison")
      }
      let samples = try interleave(
        samples: 100,
        [
          { try blocking { try await timeBatchAsync(100) { _ = try await defaults.get(stamp) } } },
          { try blocking { try await timeBatchAsync(20) { try await rawRead(raw, namespace: namespace) } } },
          {
            try blocking {
              try await timeBatchAsync(20) { _ = try await raw.query("SELECT 1", logger: RawPostgres.logger).collect() }
            }
          },
        ])
      return ScenarioResult(
        measurement: Measurement("pg.defaults.get", samples[0]), unit: "ns",
        baselines: [Measurement("pg.raw.defaults-read", samples[1]), Measurement("pg.select1", samples[2])],
        target: "from the cache, kept while this process listens and nobody writes the domain: no round trip; "
          + "≤ 0.01× pg.raw.defaults-read")
    }

    /// `pg.defaults.set`: a `set`, which returns once its commit is confirmed, against the same
    /// statement on a bare connection (`pg.raw.defaults-write`: the generation bumped, the value
    /// upserted and the notification queued, in one commit) and that followed by the confirming
    /// `SELECT 1` (`pg.raw.defaults-write-confirmed`).
    static func set(_ container: PostgresContainer, _ raw: PostgresConnection, namespace: String) throws
      -> ScenarioResult
    {
      let defaults = try blocking { try await container.defaults("bench-set") }
      try blocking { try await defaults.set(0, for: stamp) }
      let batch = 20
      let samples = try interleave(
        samples: 100,
        [
          PlaceScenarios.defaultsSet(defaults, stamp, batch: batch, value: now),
          {
            try blocking {
              try await timeBatchAsync(batch) {
                try await rawWrite(raw, namespace: namespace, value: now(), notifying: "liaison")
              }
            }
          },
          {
            try blocking {
              try await timeBatchAsync(batch) {
                try await rawWrite(raw, namespace: namespace, value: now(), notifying: "liaison")
                _ = try await raw.query("SELECT 1", logger: RawPostgres.logger).collect()
              }
            }
          },
        ])
      return ScenarioResult(
        measurement: Measurement("pg.defaults.set", samples[0]), unit: "ns",
        baselines: [
          Measurement("pg.raw.defaults-write", samples[1]), Measurement("pg.raw.defaults-write-confirmed", samples[2]),
        ],
        target: "1 statement with a commit (one WAL flush), then 1 round trip that confirms the commit; "
          + "expect ≈ pg.raw.defaults-write-confirmed")
    }

    /// `pg.defaults.visibility`: a `set` here until another process, iterating the domain's
    /// `changes()`, has the new value from its `get`. Against the same write statement on a bare
    /// connection notifying a bare listener in another process (`pg.raw.defaults-write-notify`).
    static func visibility(
      _ container: PostgresContainer, _ raw: PostgresConnection, url: String, namespace: String
    ) throws -> ScenarioResult {
      let defaults = try blocking { try await container.defaults("bench-visibility") }
      try blocking { try await defaults.set(0, for: stamp) }
      let observer = try BenchPeer("pg-defaults-observer", [url, namespace, "bench-visibility"])
      let listener = try BenchPeer("pg-raw-listener", [url])
      let samples = try interleave(
        samples: 400,
        [
          PlaceScenarios.defaultsVisibility(defaults, stamp, observer),
          {
            try blocking {
              try await rawWrite(raw, namespace: namespace, value: now(), notifying: PostgresScenarios.floorChannel)
            }
            return Double(listener.readTimestamp())
          },
        ])
      for (peer, name) in [(observer, "defaults observer"), (listener, "raw listener")] {
        if let ending = peer.stop() { throw BenchError("the \(name) peer: \(ending)") }
      }
      return ScenarioResult(
        measurement: Measurement("pg.defaults.visibility", samples[0]), unit: "ns",
        baselines: [Measurement("pg.raw.defaults-write-notify", samples[1])],
        target: "the write's commit notifies; the observer's get reads the new value (1 round trip); "
          + "expect ≈ pg.raw.defaults-write-notify + pg.raw.defaults-read")
    }

    // MARK: The same statements on bare connections

    /// LiaisonPostgres's write statement (`PostgresDefaults.statement(setting:)`) for the raw
    /// domain, its notification on `channel` carrying `value` (the floor's listener answers
    /// with the time since it).
    static func rawWrite(_ connection: PostgresConnection, namespace: String, value: UInt64, notifying channel: String)
      async throws
    {
      let stored = Data(String(value).utf8)
      _ = try await connection.query(
        """
        WITH bumped AS (
          INSERT INTO liaison.defaults_domain AS d (namespace, domain, generation) VALUES (\(namespace), \(rawDomain), 1)
          ON CONFLICT (namespace, domain) DO UPDATE SET generation = d.generation + 1
          RETURNING generation),
        written AS (
          INSERT INTO liaison.defaults_entry (namespace, domain, key, kind, value)
          SELECT \(namespace), \(rawDomain), 'stamp', 0::smallint, \(ByteBuffer(bytes: stored)) FROM bumped
          ON CONFLICT (namespace, domain, key) DO UPDATE SET kind = excluded.kind, value = excluded.value)
        SELECT generation, pg_notify(\(channel), \(String(value))) FROM bumped
        """, logger: RawPostgres.logger
      ).collect()
    }

    /// LiaisonPostgres's read statement (`PostgresDefaults.read(_:)`) for the raw domain.
    static func rawRead(_ connection: PostgresConnection, namespace: String) async throws {
      _ = try await connection.query(
        """
        SELECT coalesce(d.generation, 0), e.kind, e.value FROM (SELECT 1) AS one
        LEFT JOIN liaison.defaults_domain d ON d.namespace = \(namespace) AND d.domain = \(rawDomain)
        LEFT JOIN liaison.defaults_entry e ON e.namespace = \(namespace) AND e.domain = \(rawDomain) AND e.key = 'stamp'
        """, logger: RawPostgres.logger
      ).collect()
    }

    // MARK: The observer peer

    /// The observer peer (`PlaceScenarios.observe`) of `stamp` on the server at `url`.
    static func observe(url: String, namespace: String, domain: String, input: CInt, output: CInt) throws -> Never {
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      let defaults = try blocking { try await container.defaults(domain) }
      try PlaceScenarios.observe(defaults, stamp, input: input, output: output, keeping: container)
    }
  }
#endif
