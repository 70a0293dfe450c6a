// The scenarios of `liaison-bench postgres` (PostgresBench.swift), each with its floors from the
// same run: postgres-nio connections used directly, with no LiaisonPostgres in between.

import Foundation

#if Postgres
  import Liaison
  import LiaisonPostgres
  import PostgresNIO

  enum PostgresScenarios {
    /// The first key of LiaisonPostgres's lock advisory locks (`Schema.lockClass`, "LILK"): with
    /// the lock's row id, what `pg_locks` shows for a waiter.
    static let liaisonLockClass: Int32 = 0x4C49_4C4B
    /// The first key of the floors' own advisory locks ("LIBF"), apart from Liaison's.
    static let floorClass: Int32 = 0x4C49_4246
    /// The channel of the raw `NOTIFY` floor.
    static let floorChannel = "liaison_bench_floor"

    /// Runs every scenario once, handing each result to `emit` as it is measured.
    ///
    /// - Parameters:
    ///   - psycopg: the psycopg peer's samples of this run, by name (empty: skipped).
    ///   - jobQueues: the job-queue peers' figures of this run, by name (empty: skipped).
    static func run(
      url: String, namespace: String, psycopg: [String: [Double]], jobQueues: [String: JobQueuePeer.Figure],
      emit: (ScenarioResult) -> Void
    ) throws -> [ScenarioResult] {
      let (container, raw) = try blocking {
        (try await PostgresContainer(url: url, namespace: namespace), try await RawPostgres.connect(url))
      }
      defer { _ = try? blocking { try await raw.close() } }
      let peer = psycopg
      func psycopgBaselines(_ names: [String]) -> [Measurement] {
        names.compactMap { name in peer[name].flatMap { $0.isEmpty ? nil : Measurement(name, $0) } }
      }
      var results: [ScenarioResult] = []
      for result in try uncontended(container, raw, namespace, psycopgBaselines) {
        results.append(result)
        emit(result)
      }
      for result in [
        try handoff(container, url: url, namespace: namespace),
        try signalLatency(container, raw, url: url, namespace: namespace, psycopgBaselines),
      ] + (try PostgresDefaultsScenarios.run(container, raw, url: url, namespace: namespace)) {
        results.append(result)
        emit(result)
      }
      for (name, floor) in [
        ("psycopg.try-advisory-pair", "psycopg.select1"), ("psycopg.advisory-pair", "psycopg.select1"),
      ] {
        guard let samples = peer[name], !samples.isEmpty else { continue }
        let result = ScenarioResult(
          measurement: Measurement(name, samples), unit: "ns", baselines: psycopgBaselines([floor]),
          target: "(informational: the pair a psycopg user writes, 2 round trips, against psycopg's own SELECT 1)")
        results.append(result)
        emit(result)
      }
      // The mailbox's scenarios, beside their own floors, psycopg's raw deliveries and the job
      // queues a Python user would pick; each after a checkpoint, as the peers' runs are (a
      // server that is not the bench's own may refuse it: then without).
      let checkpoint = { _ = try? blocking { try await raw.query("CHECKPOINT", logger: RawPostgres.logger).collect() } }
      checkpoint()
      let latency = try PostgresMailboxScenarios.latency(
        container, raw, url: url, namespace: namespace,
        peers: psycopgBaselines(["psycopg.insert-notify-claim", "psycopg.insert-notify-listen"])
          + jobQueueBaselines(jobQueues, kind: "latency"))
      results.append(latency)
      emit(latency)
      checkpoint()
      let throughput = try PostgresMailboxScenarios.throughput(
        container, raw, url: url, namespace: namespace, peers: jobQueueBaselines(jobQueues, kind: "throughput-acked"))
      results.append(throughput)
      emit(throughput)
      for result in jobQueueResults(jobQueues, psycopg: psycopgBaselines) {
        results.append(result)
        emit(result)
      }
      return results
    }

    // MARK: - Through a pooler

    /// The lock, signal and mailbox figures through a PgBouncer in session mode, as `pg.pooled.*`,
    /// each beside its own floors through the pooler and the same figure measured directly in
    /// this run (`direct`). What a pooler adds is a hop each way, and its own processing.
    /// Transaction mode, where Liaison holds leases: ``throughTransactionPooler(bouncerURL:namespace:direct:emit:)``.
    static func throughPooler(
      pooledURL: String, namespace: String, direct: [ScenarioResult], emit: (ScenarioResult) -> Void
    ) throws -> [ScenarioResult] {
      let (container, raw) = try blocking {
        (try await PostgresContainer(url: pooledURL, namespace: namespace), try await RawPostgres.connect(pooledURL))
      }
      defer { _ = try? blocking { try await raw.close() } }
      defer { _ = try? blocking { await container.close() } }
      func directly(_ name: String) -> [Measurement] {
        direct.filter { $0.measurement.name == name }.map { $0.measurement.renamed(name + " (direct)") }
      }
      func pooled(_ result: ScenarioResult) -> ScenarioResult {
        let name = result.measurement.name
        return ScenarioResult(
          measurement: result.measurement.renamed(name.replacingOccurrences(of: "pg.", with: "pg.pooled.")),
          unit: result.unit,
          baselines: result.baselines.map { $0.renamed($0.name + " (pooled)") } + directly(name),
          target: "(informational) through PgBouncer in session mode; beside the same, direct")
      }
      var results: [ScenarioResult] = []
      let lock = try uncontended(container, raw, namespace) { _ in [] }.first!
      let signal = try signalLatency(container, raw, url: pooledURL, namespace: namespace) { _ in [] }
      let mailbox = try PostgresMailboxScenarios.latency(
        container, raw, url: pooledURL, namespace: namespace, peers: [])
      for result in [lock, signal, mailbox].map(pooled) {
        results.append(result)
        emit(result)
      }
      return results
    }

    /// The lock, signal and mailbox figures through a PgBouncer in transaction mode with
    /// `pool_mode=transaction`, as `pg.leased.*`: a lock is a lease, notifications are polled.
    /// The lock beside the lease's own statements sent raw through the pooler (take, its
    /// commit's confirmation, release) and one committed update through it; the latencies beside
    /// the same figures measured directly in this run, and the poll interval they wait for.
    static func throughTransactionPooler(
      bouncerURL: String, namespace: String, direct: [ScenarioResult], emit: (ScenarioResult) -> Void
    ) throws -> [ScenarioResult] {
      let url = bouncerURL + "&pool_mode=transaction"
      let (container, raw) = try blocking {
        (try await PostgresContainer(url: url, namespace: namespace), try await RawPostgres.connect(bouncerURL))
      }
      defer { _ = try? blocking { try await raw.close() } }
      defer { _ = try? blocking { await container.close() } }
      func directly(_ name: String) -> [Measurement] {
        direct.filter { $0.measurement.name == name }.map { $0.measurement.renamed(name + " (direct)") }
      }
      let lock = try container.lock("bench-leased")
      let sqlLock = try container.lock("bench-leased-sql")
      let sqlID = try blocking { () async throws -> Int32 in
        for _ in 0..<5 { try await exclusivePair(lock) }
        try await exclusivePair(sqlLock)
        return try await lockRowID(raw, namespace: namespace, name: "bench-leased-sql")
      }
      let batch = 20
      let floorClass = floorClass
      func sampler(_ body: @escaping @Sendable () async throws -> Void) -> () throws -> Double {
        { try blocking { try await timeBatchAsync(batch, body) } }
      }
      let holder = UUID().uuidString
      let samples = try interleave(
        samples: 100,
        [
          sampler { try await exclusivePair(lock) },
          sampler { _ = try await raw.query("SELECT 1", logger: RawPostgres.logger).collect() },
          sampler {
            // A lease's take (HeldLease.take: its token committed synchronously), the confirming
            // SELECT 1, and its release, sent raw through the pooler.
            let rows = try await raw.query(
              """
              WITH durable AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true))
              UPDATE liaison.lock SET fencing_token = fencing_token + 1, lease_holder = \(holder)::uuid,
                lease_end = clock_timestamp() + 10000::float8 * interval '1 millisecond'
              FROM durable
              WHERE id = \(sqlID) AND (lease_end IS NULL OR lease_end <= clock_timestamp())
                AND NOT EXISTS (
                  SELECT 1 FROM jsonb_each_text(shared_leases) AS s(holder, ends)
                  WHERE s.ends::float8 > (extract(epoch FROM clock_timestamp()) * 1000))
                AND pg_try_advisory_xact_lock(\(liaisonLockClass), \(sqlID))
              RETURNING fencing_token
              """, logger: RawPostgres.logger
            ).collect()
            guard !rows.isEmpty else { throw BenchError("the lease 'bench-leased-sql' is taken") }
            _ = try await raw.query("SELECT 1", logger: RawPostgres.logger).collect()
            _ = try await raw.query(
              """
              UPDATE liaison.lock SET lease_holder = NULL, lease_end = NULL
              WHERE id = \(sqlID) AND lease_holder = \(holder)::uuid
              """, logger: RawPostgres.logger
            ).collect()
          },
          sampler {
            // One committed write through the pooler: what a lease's take costs at least.
            _ = try await raw.query(
              "UPDATE liaison.lock SET fencing_token = fencing_token + 1 WHERE id = \(sqlID) RETURNING fencing_token",
              logger: RawPostgres.logger
            ).collect()
          },
          sampler {
            // A transaction's advisory lock through the pooler: the session pair has no meaning
            // there (its unlock may reach another session).
            _ = try await raw.query("SELECT pg_try_advisory_xact_lock(\(floorClass), 1)", logger: RawPostgres.logger)
              .collect()
          },
        ])
      var results = [
        ScenarioResult(
          measurement: Measurement("pg.leased.lock", samples[0]), unit: "ns",
          baselines: [
            Measurement("pg.select1 (pooled)", samples[1]), Measurement("pg.raw.lease-sql (pooled)", samples[2]),
            Measurement("pg.raw.update-commit (pooled)", samples[3]),
            Measurement("pg.raw.try-xact-advisory (pooled)", samples[4]),
          ] + directly("pg.lock.uncontended"),
          target: "(informational) through PgBouncer in transaction mode, a lease: take 1 round trip + a commit, "
            + "its confirmation 1, release 1 + a commit; expect ≈ pg.raw.lease-sql (pooled)")
      ]
      emit(results[0])
      // The latencies wait for a poll: 250 ms apart, half of that on average.
      let signal = try container.signal("bench-leased-latency")
      let observer = try BenchPeer("pg-signal-observer", [url, namespace, "bench-leased-latency"])
      let mailbox = try blocking { try await container.mailbox("bench-leased-latency", sender: "bench") }
      let receiver = try BenchPeer("pg-mailbox-receiver", [url, namespace, "bench-leased-latency", "latency"])
      // Each post and send at a random point of the poll's period, as a real one would come: one
      // made right after a delivery would wait for almost a whole period, every time.
      var phase = SplitMix64(seed: 7)
      let mailboxLatency = PlaceScenarios.mailboxLatency(mailbox, receiver)
      let latencies = try interleave(
        samples: 40,
        [
          {
            usleep(UInt32(phase.next() % 250_000))
            try blocking { try await signal.post(state: now()) }
            return Double(observer.readTimestamp())
          },
          {
            usleep(UInt32(phase.next() % 250_000))
            return try mailboxLatency()
          },
        ])
      for (peer, name) in [(observer, "signal observer"), (receiver, "mailbox receiver")] {
        if let ending = peer.stop() { throw BenchError("the \(name) peer: \(ending)") }
      }
      let pollInterval = Measurement("poll interval", [250_000_000])
      for (name, samples, direct) in [
        ("pg.leased.signal.latency", latencies[0], "pg.signal.latency"),
        ("pg.leased.mailbox.latency", latencies[1], "pg.mailbox.latency"),
      ] {
        let result = ScenarioResult(
          measurement: Measurement(name, samples), unit: "ns", baselines: [pollInterval] + directly(direct),
          target: "(informational) through PgBouncer in transaction mode, notifications polled every 250 ms: "
            + "expect about half the interval, plus a read")
        results.append(result)
        emit(result)
      }
      return results
    }

    // MARK: - The job-queue peers

    /// The job-queue peers' measurements of one kind (`latency`, `throughput`, `throughput-acked`),
    /// library by library: the baselines of a mailbox scenario of that kind. Latency in ns,
    /// throughputs in jobs/s.
    static func jobQueueBaselines(_ figures: [String: JobQueuePeer.Figure], kind: String) -> [Measurement] {
      JobQueuePeer.libraries.compactMap { library in
        figures["peer.\(library).\(kind)"].flatMap { $0.samples.isEmpty ? nil : Measurement($0.name, $0.samples) }
      }
    }

    /// `peer.LIBRARY.latency` and `peer.LIBRARY.throughput`, library by library, each with its
    /// floors: the raw psycopg deliveries (notification alone; a committed insert and its
    /// notification; that and a committed claim of the row) for the latency, and the same jobs
    /// to their acknowledgement for the throughput.
    static func jobQueueResults(
      _ figures: [String: JobQueuePeer.Figure], psycopg: ([String]) -> [Measurement]
    ) -> [ScenarioResult] {
      var results: [ScenarioResult] = []
      for library in JobQueuePeer.libraries {
        if let latency = figures["peer.\(library).latency"], !latency.samples.isEmpty {
          results.append(
            ScenarioResult(
              measurement: Measurement(latency.name, latency.samples), unit: "ns",
              baselines: psycopg([
                "psycopg.insert-notify-claim", "psycopg.insert-notify-listen", "psycopg.notify-listen",
              ]),
              target: "(informational: \(latency.library) on \(latency.driver), enqueue one job -> its function starts "
                + "in a worker process; \(latency.settings))"))
        }
        if let throughput = figures["peer.\(library).throughput"], !throughput.samples.isEmpty {
          results.append(
            ScenarioResult(
              measurement: Measurement(throughput.name, throughput.samples), unit: throughput.unit,
              baselines: figures["peer.\(library).throughput-acked"].map { [Measurement($0.name, $0.samples)] } ?? [],
              target:
                "(informational: \(throughput.library) on \(throughput.driver), jobs/s from the first enqueue to the "
                + "last job's start; -acked: to the last job finished in the database; \(throughput.settings))"))
        }
      }
      return results
    }

    // MARK: - pg.lock.uncontended

    /// `pg.lock.uncontended`: exclusive `tryLock` + `unlock`, nobody else around, against one
    /// `SELECT 1` on a postgres-nio connection (`pg.select1`); `.shared` is the shared form. The
    /// other baselines say where the time goes: the same `SELECT 1` through the container's own
    /// path (idle pool, reply watchdog), a bare advisory pair, and LiaisonPostgres's own two
    /// statements sent on a bare connection.
    static func uncontended(
      _ container: PostgresContainer, _ raw: PostgresConnection, _ namespace: String,
      _ psycopg: ([String]) -> [Measurement]
    ) throws -> [ScenarioResult] {
      let lock = try container.lock("bench-uncontended")
      let sqlLock = try container.lock("bench-liaison-sql")
      // Warms up: registers the locks' rows, opens the pool's connection.
      let sqlID = try blocking { () async throws -> Int32 in
        for _ in 0..<5 {
          try await exclusivePair(lock)
          try await sharedPair(lock)
          _ = try await container.query("SELECT 1", doing: "warm up")
        }
        try await exclusivePair(sqlLock)
        return try await lockRowID(raw, namespace: namespace, name: "bench-liaison-sql")
      }
      let batch = 20
      let (lockClass, floorClass) = (liaisonLockClass, floorClass)
      func sampler(_ body: @escaping @Sendable () async throws -> Void) -> () throws -> Double {
        { try blocking { try await timeBatchAsync(batch, body) } }
      }
      let samples = try interleave(
        samples: 100,
        [
          sampler { try await exclusivePair(lock) },
          sampler { try await sharedPair(lock) },
          sampler { _ = try await raw.query("SELECT 1", logger: RawPostgres.logger).collect() },
          sampler { _ = try await container.query("SELECT 1", doing: "bench") },
          sampler {
            let rows = try await raw.query(
              "SELECT pg_try_advisory_lock(\(floorClass), 1)", logger: RawPostgres.logger
            ).collect()
            guard try rows.first?.decode(Bool.self) == true else { throw BenchError("the floor's lock is taken") }
            _ = try await raw.query("SELECT pg_advisory_unlock(\(floorClass), 1)", logger: RawPostgres.logger).collect()
          },
          sampler {
            // LiaisonPostgres's exclusive tryLock and unlock statements (PostgresLock.swift).
            let rows = try await raw.query(
              """
              WITH granted AS MATERIALIZED (
                SELECT CASE WHEN false THEN (SELECT true FROM (SELECT pg_advisory_lock(\(lockClass), \(sqlID))) AS w)
                  ELSE pg_try_advisory_lock(\(lockClass), \(sqlID)) END AS held,
                  set_config('synchronous_commit', 'on', true)),
              token AS (
                UPDATE liaison.lock SET fencing_token = fencing_token + 1 FROM granted
                WHERE granted.held AND id = \(sqlID) AND (lease_end IS NULL OR lease_end <= clock_timestamp())
                  AND NOT EXISTS (
                    SELECT 1 FROM jsonb_each_text(shared_leases) AS s(holder, ends)
                    WHERE s.ends::float8 > extract(epoch FROM clock_timestamp()) * 1000)
                RETURNING fencing_token)
              SELECT granted.held, (SELECT fencing_token FROM token) FROM granted
              """, logger: RawPostgres.logger
            ).collect()
            guard try rows.first?.decode((Bool, Int64?).self).1 != nil else {
              throw BenchError("the lock 'bench-liaison-sql' is taken")
            }
            _ = try await raw.query(
              "SELECT pg_advisory_unlock(\(lockClass), \(sqlID)), set_config('lock_timeout', '0', false)",
              logger: RawPostgres.logger
            ).collect()
          },
          sampler {
            // One committed write: what the token adds to a grant.
            _ = try await raw.query(
              "UPDATE liaison.lock SET fencing_token = fencing_token + 1 WHERE id = \(sqlID) RETURNING fencing_token",
              logger: RawPostgres.logger
            ).collect()
          },
        ])
      let select1 = Measurement("pg.select1", samples[2])
      let viaContainer = Measurement("pg.select1.container-path", samples[3])
      let advisoryPair = Measurement("pg.raw.try-advisory-pair", samples[4])
      let liaisonSQL = Measurement("pg.raw.liaison-sql-pair", samples[5])
      let commit = Measurement("pg.raw.update-commit", samples[6])
      return [
        ScenarioResult(
          measurement: Measurement("pg.lock.uncontended", samples[0]), unit: "ns",
          baselines: [select1, viaContainer, advisoryPair, liaisonSQL, commit]
            + psycopg(["psycopg.try-advisory-pair", "psycopg.advisory-pair"]),
          target: "round trips: tryLock 1 + a commit (the fencing token: one WAL flush), unlock 1; "
            + "expect ≈ pg.select1 + pg.raw.update-commit ≈ pg.raw.liaison-sql-pair"),
        ScenarioResult(
          measurement: Measurement("pg.lock.uncontended.shared", samples[1]), unit: "ns",
          baselines: [select1, viaContainer, advisoryPair] + psycopg(["psycopg.try-advisory-pair"]),
          target: "(informational) round trips: tryLock 1, unlock 1, no commit; expect ≈ pg.raw.try-advisory-pair"),
      ]
    }

    private static func exclusivePair(_ lock: PostgresLock) async throws {
      guard let held = try await lock.tryLock(.exclusive) else { throw BenchError("'\(lock.name)' is taken") }
      await held.unlock()
    }

    private static func sharedPair(_ lock: PostgresLock) async throws {
      guard let held = try await lock.tryLock(.shared) else { throw BenchError("'\(lock.name)' is taken") }
      await held.unlock()
    }

    /// The row id of a Liaison lock (its advisory lock's second key), once it was used.
    static func lockRowID(_ connection: PostgresConnection, namespace: String, name: String) async throws -> Int32 {
      let rows = try await connection.query(
        "SELECT id FROM liaison.lock WHERE namespace = \(namespace) AND name = \(name)", logger: RawPostgres.logger
      ).collect()
      guard let id = try rows.first?.decode(Int32.self) else { throw BenchError("no row for the lock '\(name)'") }
      return id
    }

    // MARK: - pg.lock.handoff

    /// `pg.lock.handoff`: a holder in another process unlocks; the time until `lock()` returns
    /// here, where it waited on the server. Floor `pg.advisory-handoff.raw`: the same with a bare
    /// `pg_advisory_lock` on postgres-nio connections in both processes.
    static func handoff(_ container: PostgresContainer, url: String, namespace: String) throws -> ScenarioResult {
      let lock = try container.lock("bench-handoff")
      let holder = try BenchPeer("pg-lock-holder", [url, namespace, "bench-handoff"])
      let rawHolder = try BenchPeer("pg-raw-lock-holder", [url])
      let waiter = try blocking { try await RawPostgres.connect(url) }
      defer { _ = try? blocking { try await waiter.close() } }
      let pipe = try Floor.pipeHalfRoundTrip()
      let floorClass = floorClass

      let samples = try interleave(
        samples: 300,
        [
          { try PlaceScenarios.handoff(from: holder) { try blocking { try await PlaceScenarios.acquire(lock) } } },
          {
            try PlaceScenarios.handoff(from: rawHolder) {
              try blocking {
                _ = try await waiter.query("SELECT pg_advisory_lock(\(floorClass), 2)", logger: RawPostgres.logger)
                  .collect()
                let acquiredAt = now()
                _ = try await waiter.query("SELECT pg_advisory_unlock(\(floorClass), 2)", logger: RawPostgres.logger)
                  .collect()
                return acquiredAt
              }
            }
          },
          pipe,
        ])
      for (peer, name) in [(holder, "lock holder"), (rawHolder, "raw lock holder")] {
        if let ending = peer.stop() { throw BenchError("the \(name) peer: \(ending)") }
      }
      return ScenarioResult(
        measurement: Measurement("pg.lock.handoff", samples[0]), unit: "ns",
        baselines: [
          Measurement("pg.advisory-handoff.raw", samples[1]), Measurement("floor.pipe-half-rtt", samples[2]),
        ],
        target: "the holder's unlock (1 round trip) wakes the waiter's statement on the server, which then commits "
          + "the token (one WAL flush) and replies; expect ≈ pg.advisory-handoff.raw + a commit")
    }

    /// The holder peer: on `g`, takes the lock, answers `h`, waits until `pg_locks` shows the
    /// waiter blocked on the server, then unlocks and sends the time just before the unlock.
    static func holdAndRelease(url: String, namespace: String, name: String, input: CInt, output: CInt) throws
      -> Never
    {
      let (container, poll) = try blocking {
        (try await PostgresContainer(url: url, namespace: namespace), try await RawPostgres.connect(url))
      }
      let lock = try container.lock(name)
      let id = try blocking {
        try await exclusivePair(lock)
        return try await lockRowID(poll, namespace: namespace, name: name)
      }
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        let held = try blocking { try await lock.lock() }
        writeBytes(output, [UInt8(ascii: "h")])
        let releasedAt = try blocking {
          try await waitForWaiter(poll, classID: liaisonLockClass, objectID: id)
          let releasedAt = now()
          await held.unlock()
          return releasedAt
        }
        writeBytes(output, encodeTimestamp(releasedAt))
      }
    }

    /// The raw holder peer: the same with `pg_advisory_lock` on a postgres-nio connection.
    static func holdAndReleaseRaw(url: String, input: CInt, output: CInt) throws -> Never {
      let (holding, poll) = try blocking { (try await RawPostgres.connect(url), try await RawPostgres.connect(url)) }
      let floorClass = floorClass
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        try blocking {
          _ = try await holding.query("SELECT pg_advisory_lock(\(floorClass), 2)", logger: RawPostgres.logger).collect()
        }
        writeBytes(output, [UInt8(ascii: "h")])
        let releasedAt = try blocking {
          try await waitForWaiter(poll, classID: floorClass, objectID: 2)
          let releasedAt = now()
          _ = try await holding.query("SELECT pg_advisory_unlock(\(floorClass), 2)", logger: RawPostgres.logger)
            .collect()
          return releasedAt
        }
        writeBytes(output, encodeTimestamp(releasedAt))
      }
    }

    /// Waits (at most `seconds`) until `pg_locks` shows `count` sessions waiting for the advisory
    /// lock with these two keys: the waiters really asleep on the server.
    static func waitForWaiter(
      _ poll: PostgresConnection, classID: Int32, objectID: Int32, count: Int = 1, seconds: UInt64 = 5
    ) async throws {
      let deadline = now() + seconds * 1_000_000_000
      while now() < deadline {
        let rows = try await poll.query(
          """
          SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
          AND classid::bigint = \(Int64(classID)) AND objid::bigint = \(Int64(objectID)) AND objsubid = 2
          """, logger: RawPostgres.logger
        ).collect()
        if try (rows.first?.decode(Int64.self) ?? 0) >= count { return }
        try await Task.sleep(for: .microseconds(200))
      }
      throw BenchError(
        "\(count) session(s) did not all wait for the advisory lock (\(classID), \(objectID)) within \(seconds) s")
    }

    // MARK: - pg.signal.latency

    /// `pg.signal.latency`: `post(state:)` here → the observer's `notifications` yields in another
    /// process, one way; floor `pg.notify.raw`: a bare `NOTIFY` on a postgres-nio connection →
    /// `listen(on:consume:)` on another one in another process; and `pg.raw.post-sql`, the post's
    /// own statement sent the same way (it writes a row, so its commit waits for the WAL flush
    /// that a bare `NOTIFY`'s does not). Each post carries the time it was sent, and the observer
    /// answers how long ago that was.
    static func signalLatency(
      _ container: PostgresContainer, _ raw: PostgresConnection, url: String, namespace: String,
      _ psycopg: ([String]) -> [Measurement]
    ) throws -> ScenarioResult {
      let signal = try container.signal("bench-latency")
      let observer = try BenchPeer("pg-signal-observer", [url, namespace, "bench-latency"])
      let listener = try BenchPeer("pg-raw-listener", [url])
      let samples = try interleave(
        samples: 600,
        [
          {
            try blocking { try await signal.post(state: now()) }
            return Double(observer.readTimestamp())
          },
          {
            try blocking {
              _ = try await raw.query(
                PostgresQuery(unsafeSQL: "NOTIFY \(floorChannel), '\(now())'"), logger: RawPostgres.logger
              ).collect()
            }
            return Double(listener.readTimestamp())
          },
          {
            // LiaisonPostgres's post statement (PostgresSignal.swift), notifying the bare listener.
            try blocking {
              _ = try await raw.query(
                """
                WITH posted AS (
                  INSERT INTO liaison.signal AS s (namespace, name, state, posts) VALUES (\(namespace), 'bench-raw-post', 0, 1)
                  ON CONFLICT (namespace, name) DO UPDATE SET state = s.state, posts = s.posts + 1
                  RETURNING posts, state)
                SELECT pg_notify(\(floorChannel), \(String(now()))) FROM posted
                """, logger: RawPostgres.logger
              ).collect()
            }
            return Double(listener.readTimestamp())
          },
        ])
      for (peer, name) in [(observer, "signal observer"), (listener, "raw listener")] {
        if let ending = peer.stop() { throw BenchError("the \(name) peer: \(ending)") }
      }
      return ScenarioResult(
        measurement: Measurement("pg.signal.latency", samples[0]), unit: "ns",
        baselines: [Measurement("pg.notify.raw", samples[1]), Measurement("pg.raw.post-sql", samples[2])]
          + psycopg(["psycopg.notify-listen"]),
        target: "post: 1 round trip with a commit (the state's row and the NOTIFY: one WAL flush, which a bare "
          + "NOTIFY does not wait for), delivered at the commit; expect ≈ pg.raw.post-sql")
    }

    /// The observer peer: iterates the signal's notifications and answers each with the time since
    /// the post (the state), in nanoseconds.
    static func observe(url: String, namespace: String, name: String, input: CInt, output: CInt) throws -> Never {
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      let notifications = try blocking { try await container.signal(name).notifications() }
      Task.detached {
        for await notification in notifications {
          writeBytes(output, encodeTimestamp(now() &- notification.state))
        }
        withExtendedLifetime(container) {}
      }
      writeBytes(output, [UInt8(ascii: "r")])
      _ = readBytes(input, 1)  // ends the process when the input closes
      fatalError("unreachable")
    }

    /// The raw listener peer: `LISTEN` through postgres-nio, answering each notification with the
    /// time since its payload's.
    static func listenRaw(url: String, input: CInt, output: CInt) throws -> Never {
      let connection = try blocking { try await RawPostgres.connect(url) }
      Task.detached {
        do {
          try await connection.listen(on: floorChannel) { notifications in
            writeBytes(output, [UInt8(ascii: "r")])  // LISTEN is in effect
            for try await notification in notifications {
              writeBytes(output, encodeTimestamp(now() &- (UInt64(notification.payload) ?? 0)))
            }
          }
        } catch {
          FileHandle.standardError.write(Data("raw listener: \(error)\n".utf8))
          exit(1)
        }
      }
      _ = readBytes(input, 1)  // ends the process when the input closes
      fatalError("unreachable")
    }

    // MARK: - Peers and cleanup

    /// The peer roles of these scenarios (`liaison-bench --peer ROLE …`).
    static func peer(_ role: String, _ arguments: [String], input: CInt, output: CInt) throws -> Never {
      switch role {
      case "pg-lock-holder":
        try holdAndRelease(url: arguments[0], namespace: arguments[1], name: arguments[2], input: input, output: output)
      case "pg-raw-lock-holder":
        try holdAndReleaseRaw(url: arguments[0], input: input, output: output)
      case "pg-signal-observer":
        try observe(url: arguments[0], namespace: arguments[1], name: arguments[2], input: input, output: output)
      case "pg-raw-listener":
        try listenRaw(url: arguments[0], input: input, output: output)
      case "pg-mailbox-receiver":
        try PostgresMailboxScenarios.receive(
          url: arguments[0], namespace: arguments[1], name: arguments[2], mode: Array(arguments.dropFirst(3)),
          input: input, output: output)
      case "pg-defaults-observer":
        try PostgresDefaultsScenarios.observe(
          url: arguments[0], namespace: arguments[1], domain: arguments[2], input: input, output: output)
      case "pg-raw-mailbox-receiver":
        try PostgresMailboxScenarios.receiveRaw(
          url: arguments[0], namespace: arguments[1], input: input, output: output)
      case _ where role.hasPrefix("pg-scale-"):
        try PostgresScale.peer(role, arguments, input: input, output: output)
      default:
        fatalError("unknown peer role \(role)")
      }
    }

    /// Deletes the bench's rows from a database it did not start.
    static func deleteRows(url: String, namespace: String) {
      _ = try? blocking {
        let connection = try await RawPostgres.connect(url)
        for query: PostgresQuery in [
          "DELETE FROM liaison.lock WHERE namespace = \(namespace)",
          "DELETE FROM liaison.signal WHERE namespace = \(namespace)",
          "DELETE FROM liaison.presence WHERE namespace = \(namespace)",
          "DELETE FROM liaison.mailbox_message WHERE namespace = \(namespace)",
          "DELETE FROM liaison.mailbox_acknowledged WHERE namespace = \(namespace)",
          "DELETE FROM liaison.mailbox_receipt WHERE namespace = \(namespace)",
          "DELETE FROM liaison.mailbox WHERE namespace = \(namespace)",
          "DELETE FROM liaison.defaults_entry WHERE namespace = \(namespace)",
          "DELETE FROM liaison.defaults_domain WHERE namespace = \(namespace)",
        ] {
          _ = try? await connection.query(query, logger: RawPostgres.logger).collect()
        }
        try await connection.close()
      }
    }
  }

  /// postgres-nio connections with nothing of LiaisonPostgres: the floors'.
  enum RawPostgres {
    static let logger: Logger = {
      var logger = Logger(label: "liaison-bench.postgres")
      logger.logLevel = .critical
      return logger
    }()

    static func connect(_ url: String) async throws -> PostgresConnection {
      try await PostgresConnection.connect(configuration: try configuration(url), id: 0, logger: logger)
    }

    /// The configuration of a `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…]` URL
    /// (or `?host=/socket-folder`), read as LiaisonPostgres reads it.
    static func configuration(_ url: String) throws -> PostgresConnection.Configuration {
      guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme),
        let user = components.user
      else { throw BenchError("not a postgres://USER@HOST/DATABASE URL: \(url)") }
      let parameters = Dictionary(
        (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
      let path = components.path.drop { $0 == "/" }
      let database = path.isEmpty ? nil : String(path)
      if let folder = parameters["host"], folder.hasPrefix("/") {
        return .init(
          unixSocketPath: folder + "/.s.PGSQL.\(components.port ?? 5432)", username: user,
          password: components.password, database: database)
      }
      let tls: PostgresConnection.Configuration.TLS
      switch parameters["sslmode"] ?? "prefer" {
      case "disable": tls = .disable
      case "require": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
      default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
      }
      return .init(
        host: components.host ?? "localhost", port: components.port ?? 5432, username: user,
        password: components.password, database: database, tls: tls)
    }
  }

#else
  enum PostgresScenarios {
    static func peer(_ role: String, _ arguments: [String], input: CInt, output: CInt) throws -> Never {
      fatalError("the peer role \(role) needs the package trait `Postgres`")
    }
  }
#endif
