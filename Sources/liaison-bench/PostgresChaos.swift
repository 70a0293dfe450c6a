// liaison-bench chaos --postgres: the chaos run across a PostgreSQL server that is restarted at
// random, with one worker on a network that is cut at random (a network namespace), while
// workers are killed with SIGKILL. See `PostgresChaos` for what is checked.

import Foundation

#if Postgres
  import ChildProcesses
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// The distributed chaos: worker processes use locks, mailboxes, defaults and signals on a throwaway
  /// PostgreSQL server, with a detection bound of 2 s, while the orchestrator kills workers with
  /// SIGKILL, **restarts the server**, and **cuts the network** of the worker that runs in a
  /// network namespace for a while. Worker 0 is the mailbox's receiver; worker 1 runs in the
  /// namespace.
  ///
  /// Each lock hold makes two writes to one shared resource, each guarded by the hold's fencing
  /// token (`UPDATE … WHERE token <= $token`), and the resource keeps every write it applied, in
  /// order. Checked from the workers' logs and the server's tables:
  ///
  /// - **mutual exclusion, judged by fencing tokens**: no two holds got the same token, and the
  ///   applied writes' tokens never go down (a write with a stale token was refused, never
  ///   applied);
  /// - **every lost lock reported to its holder**: a hold whose write was refused had been told of
  ///   its loss (`loss`) by the time the refusal came back, or within the time a holder notices;
  /// - **no acknowledged message lost or delivered again**: every send that returned was received,
  ///   a message received twice had not been acknowledged before, and the mailbox ends empty, with
  ///   nothing quarantined;
  /// - **counters exact**: the defaults total equals the sum of the per-worker counts written in
  ///   the same transactions;
  /// - the signal's post count is at least the number of posts that returned;
  /// - no worker ended by itself, and no operation failed other than by `unavailable`, `lost` or
  ///   `timedOut` (what a restart or a cut network may cause).
  enum PostgresChaos {
    static let namespace = "chaos"

    /// Runs the chaos; returns the number of violations found.
    static func run(_ options: Chaos.Options) throws -> Int {
      let work = NSTemporaryDirectory() + "liaison-pg-chaos-\(getpid())"
      try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
      var keepLogs = false
      defer {
        if keepLogs {
          print("chaos: the workers' logs are kept in \(work)")
        } else {
          try? FileManager.default.removeItem(atPath: work)
        }
      }
      var random = SplitMix64(seed: options.seed)
      guard options.pooled || NetworkNamespace.unavailableReason == nil else {
        throw BenchError("the PostgreSQL chaos cuts a network: \(NetworkNamespace.unavailableReason!)")
      }
      let network = options.pooled ? nil : try NetworkNamespace.create()
      defer { network?.remove() }
      let server = try PostgresTestServer.start(
        listenAddresses: ["127.0.0.1"] + [network?.hostAddress].compactMap { $0 })
      defer { server.remove() }
      let pooler = options.pooled ? try PgBouncerTestServer.start(in: server, mode: .transaction) : nil
      defer { pooler?.remove() }
      try server.psql(
        """
        CREATE TABLE chaos_resource (id integer PRIMARY KEY, token bigint NOT NULL);
        INSERT INTO chaos_resource VALUES (1, 0);
        CREATE TABLE chaos_write (id bigserial PRIMARY KEY, token bigint NOT NULL, worker text NOT NULL);
        """)
      let local =
        (pooler.map { $0.url + "&pool_mode=transaction" } ?? server.url + "?sslmode=disable") + "#" + namespace
      let remote = network.map { server.url(host: $0.hostAddress) + "?sslmode=disable#" + namespace } ?? local
      print(
        "chaos: PostgreSQL, \(options.processes) processes for \(options.seconds) s, seed \(options.seed); "
          + (pooler == nil
            ? "worker 1 on a network that is cut"
            : "through PgBouncer in transaction mode (leases), which is restarted"))
      if options.sabotage {
        print(
          "chaos: SABOTAGED workers (no lock, a made-up token, messages not logged, counts skipped): violations expected"
        )
        setenv(Chaos.sabotageVariable, "1", 1)
      }

      let here: ([String]) -> [String] = { $0 }
      let inNamespace: ([String]) -> [String] = network.map { network in { network.command($0) } } ?? here
      func start(_ index: Int, _ incarnation: Int, seed: UInt64) throws -> Chaos.Worker {
        try Chaos.Worker(
          role: "postgres-chaos-worker", index: index, incarnation: incarnation,
          place: index == 1 ? remote : local, logs: work, seed: seed, launcher: index == 1 ? inNamespace : here)
      }
      var workers: [Chaos.Worker] = []
      for index in 0..<options.processes {
        do {
          workers.append(try start(index, 0, seed: random.next()))
        } catch {
          if let pooler { print("chaos: PgBouncer's log:\n" + pooler.log) }
          throw error
        }
      }
      let deadline = now() + UInt64(options.seconds * 1e9)
      var (kills, restarts, cuts, poolerRestarts) = (0, 0, 0, 0)
      var selfEnded: [String] = []
      while now() < deadline {
        usleep(UInt32(random.next() % 300_000 + 100_000))  // the chaos's own rhythm
        switch random.next() % 10 {
        case 0:
          try server.restart()
          restarts += 1
        case 1:
          if let pooler {
            try pooler.restart()
            poolerRestarts += 1
          } else if let network {
            // Longer than the holder's notice (≈ 0.7 s at a 2 s bound) half the time.
            try network.cut()
            usleep(UInt32(random.next() % 2_500_000 + 300_000))
            try network.restore()
            cuts += 1
          }
        default:
          let victim = Int(random.next() % UInt64(workers.count))
          if let ending = workers[victim].kill().endedByItself { selfEnded.append(ending) }
          kills += 1
          workers[victim] = try start(victim, workers[victim].incarnation + 1, seed: random.next())
        }
      }
      for worker in workers.dropFirst() { selfEnded += [worker.stop(within: 30)].compactMap { $0 } }
      let drainDeadline = now() + 60_000_000_000
      while try count("SELECT count(*) FROM liaison.mailbox_message WHERE namespace = 'chaos'", server) > 0,
        now() < drainDeadline
      {
        usleep(20_000)
      }
      selfEnded += [workers[0].stop(within: 30)].compactMap { $0 }

      var report = Chaos.Report()
      for ending in selfEnded { report.violation(ending) }
      try check(logs: work, server: server, report: &report)
      print(
        "chaos: \(restarts) server restarts, "
          + (pooler == nil ? "\(cuts) network cuts (worker 1)" : "\(poolerRestarts) PgBouncer restarts"))
      report.print(kills: kills)
      keepLogs = !report.violations.isEmpty
      return report.violations.count
    }

    private static func count(_ sql: String, _ server: PostgresTestServer) throws -> Int {
      Int(try server.psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    // MARK: A worker

    /// A worker's life: random operations until its input closes (or it is killed). `place` is
    /// `URL#NAMESPACE`.
    static func work(_ arguments: [String]) throws -> Never {
      let (place, log, index, seed) = (arguments[0], arguments[1], Int(arguments[2])!, UInt64(arguments[3])!)
      let note = Chaos.logger(log)
      let parts = place.split(separator: "#").map(String.init)
      let stopping = Locked(false)
      Thread.detachNewThread {
        Chaos.waitForEndOfInput()
        stopping.withLock { $0 = true }
      }
      let done = DispatchSemaphore(value: 0)
      Task.detached {
        defer { done.signal() }
        do {
          // Opened again while the server is away (a restart; through the pooler, which refuses
          // clients for a while after a failed login), as a service that starts then would.
          var opened: PostgresContainer?
          for attempt in 1...100 {
            do {
              opened = try await PostgresContainer(
                url: parts[0], namespace: parts[1], configuration: .init(detectionBound: .seconds(2)))
              break
            } catch let error as LiaisonError where error.code == .unavailable && attempt < 100 {
              note("e \(error.code)")
              try await Task.sleep(for: .milliseconds(200))
            }
          }
          let container = opened!
          writeBytes(FileHandle.standardOutput.fileDescriptor, [UInt8(ascii: "r")])
          if index == 0 {
            await receive(container, note: note, stopping: stopping)
          } else {
            await operate(container, index: index, incarnation: log, seed: seed, note: note, stopping: stopping)
          }
        } catch {
          note("E start: \(error)")
          FileHandle.standardError.write(Data("E start: \(error)\n".utf8))  // for the orchestrator to show
          exit(1)
        }
      }
      done.wait()
      exit(0)
    }

    /// Logs an operation's failure: "e CODE" for what a restart or a cut may cause, "E …" for
    /// anything else (a violation).
    private static func failed(_ error: any Error, _ note: (String) -> Void) async {
      if let error = error as? LiaisonError, [.unavailable, .lost, .timedOut].contains(error.code) {
        note("e \(error.code)")
      } else {
        note("E \(error)")
      }
      try? await Task.sleep(for: .milliseconds(50))
    }

    private static func operate(
      _ container: PostgresContainer, index: Int, incarnation log: String, seed: UInt64,
      note: @escaping @Sendable (String) -> Void, stopping: Locked<Bool>
    ) async {
      var random = SplitMix64(seed: seed)
      let sender = "w\(index)-\(UInt32.random(in: 0...UInt32.max))"
      let total = DefaultsKey<Int>("total")
      guard let mine = try? DefaultsKey<Int>(validating: "count-w\(index)") else { return }
      var sequence = 0
      while !stopping.withLock({ $0 }) {
        let operation = random.next() % 4
        note("> \(operation)")  // which operation a worker that never stops is stuck in
        do {
          switch operation {
          case 0:
            try await hold(container, worker: sender, pause: random.next() % 2_000, note: note)
          case 2:
            // The total and this worker's count, in one transaction; a sabotaged worker skips
            // its count now and then.
            let skip = Chaos.sabotaged && random.next() % 20 == 0
            try await container.defaults("chaos").transaction { transaction in
              try await transaction.set((try await transaction.get(total) ?? 0) + 1, for: total)
              try await transaction.set((try await transaction.get(mine) ?? 0) + (skip ? 0 : 1), for: mine)
            }
            note("D")
          case 1:
            let id = "\(sender)-\(sequence)"
            sequence += 1
            try await container.mailbox("chaos-inbox", sender: sender).send(sequence, id: id)
            note("M \(id)")
          default:
            try await container.signal("chaos-signal").post(state: random.next())
            note("S")
          }
        } catch {
          await failed(error, note)
        }
      }
    }

    /// One hold of the lock: two fenced writes to the resource, a pause between. Logs
    /// "L TOKEN", and "U TOKEN" when a write was refused while the holder had not been told of
    /// a loss (a violation).
    private static func hold(
      _ container: PostgresContainer, worker: String, pause: UInt64, note: @escaping @Sendable (String) -> Void
    ) async throws {
      let held: PostgresLockGuard?
      let token: UInt64
      if Chaos.sabotaged {
        held = nil
        let rows = try await container.query(
          "SELECT max(token) + 1 FROM chaos_resource", doing: "make up a token")
        token = UInt64(try rows.first!.decode(Int64.self))
      } else {
        let taken = try await container.lock("chaos-lock").lock(.exclusive, timeout: .seconds(5))
        held = taken
        token = try await taken.fencingToken()
      }
      note("L \(token)")
      defer { if let held { Task { await held.unlock() } } }
      for step in 0..<2 {
        if step == 1 { try await Task.sleep(for: .microseconds(pause)) }
        let applied = try await container.query(
          """
          WITH fenced AS (UPDATE chaos_resource SET token = \(Int64(token)) WHERE id = 1 AND token <= \(Int64(token))
            RETURNING 1)
          INSERT INTO chaos_write (token, worker) SELECT \(Int64(token)), \(worker) FROM fenced RETURNING 1
          """, doing: "write to the resource")
        guard applied.isEmpty else { continue }
        // Refused: a later grant wrote. The holder must know its lock is lost, now or within the
        // time a holder notices (a heartbeat and its reply: 2 s / 7 + 2 s / 5).
        if let held, held.loss == nil {
          let told = await withTaskGroup(of: Bool.self) { group in
            group.addTask { () async -> Bool in
              do { return try await held.waitForLoss() != nil } catch { return false }
            }
            group.addTask {
              try? await Task.sleep(for: .milliseconds(900))
              return false
            }
            let first = await group.next()!
            group.cancelAll()
            return first
          }
          if !told { note("U \(token)") }
        } else if held == nil {
          note("U \(token)")
        }
        return
      }
    }

    /// Worker 0: the mailbox's receiver. Waits for the receive claim (a killed predecessor's
    /// session ends within moments, a cut-off one's within the bound); logs each batch ("R id"
    /// lines, one write) before acknowledging it, and "A" after.
    private static func receive(
      _ container: PostgresContainer, note: @escaping @Sendable (String) -> Void, stopping: Locked<Bool>
    ) async {
      let inbox: PostgresMailbox
      do {
        inbox = try await container.mailbox("chaos-inbox")
      } catch {
        note("E \(error)")
        return
      }
      while !stopping.withLock({ $0 }) {
        do {
          let receiver = try await inbox.receiver(timeout: .seconds(10))
          while !stopping.withLock({ $0 }) {
            let batch = try await withTimeout(.milliseconds(200)) { try await receiver.receive(Int.self, limit: 32) }
            guard let batch else { continue }
            try await Chaos.handle(batch, of: receiver, note: note)
          }
          await receiver.close()
        } catch {
          await failed(error, note)
        }
      }
    }

    /// `body`'s result, or `nil` when it took longer than `limit` (it is cancelled then).
    private static func withTimeout<T: Sendable>(
      _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T? {
      try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
          try? await Task.sleep(for: limit)
          return nil
        }
        defer { group.cancelAll() }
        return try await group.next()!
      }
    }

    // MARK: Checking

    private static func check(logs: String, server: PostgresTestServer, report: inout Chaos.Report) throws {
      var tokens: [UInt64: Int] = [:]
      var counts: [String: Int] = [:]
      var sent: Set<String> = []
      let files = try FileManager.default.contentsOfDirectory(atPath: logs).filter { $0.hasSuffix(".log") }
      for file in files where !file.hasPrefix("worker-0-") {
        for line in try String(contentsOfFile: logs + "/" + file, encoding: .utf8).split(separator: "\n") {
          let words = line.split(separator: " ", maxSplits: 1).map(String.init)
          counts[words[0], default: 0] += 1
          switch words[0] {
          case "L": tokens[UInt64(words[1]) ?? 0, default: 0] += 1
          case "U": report.violation("\(file): a write with token \(words[1]) was refused, and its holder was not told")
          case "M": sent.insert(words[1])
          case "E": report.violation("\(file): \(words.count > 1 ? words[1] : "")")
          default: break
          }
        }
      }
      for (token, holds) in tokens where holds > 1 {
        report.violation("fencing: \(holds) holds got the token \(token)")
      }
      let applied = try server.psql("SELECT token FROM chaos_write ORDER BY id").split(separator: "\n").compactMap {
        UInt64($0.trimmingCharacters(in: .whitespaces))
      }
      for (earlier, later) in zip(applied, applied.dropFirst()) where later < earlier {
        report.violation("fencing: a write with token \(later) was applied after one with token \(earlier)")
      }
      try checkMailbox(logs: logs, sent: sent, server: server, report: &report)
      let totals = try server.psql(
        """
        SELECT coalesce(sum(convert_from(value, 'UTF8')::bigint) FILTER (WHERE key = 'total'), 0) || ' ' ||
          coalesce(sum(convert_from(value, 'UTF8')::bigint) FILTER (WHERE key LIKE 'count-w%'), 0)
        FROM liaison.defaults_entry WHERE namespace = 'chaos' AND domain = 'chaos'
        """
      ).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
      if totals.count != 2 || totals[0] != totals[1] {
        report.violation("defaults: total \(totals.first ?? "?") ≠ sum of per-worker counts \(totals.last ?? "?")")
      }
      let posts = try count(
        "SELECT coalesce(max(posts), 0) FROM liaison.signal WHERE namespace = 'chaos' AND name = 'chaos-signal'", server
      )
      if posts < counts["S", default: 0] {
        report.violation("signal: \(posts) posts counted, \(counts["S", default: 0]) returned")
      }
      report.figures += [
        ("lock holds", counts["L", default: 0]), ("fenced writes applied", applied.count),
        ("mailbox sends", sent.count), ("signal posts", counts["S", default: 0]),
        ("defaults transactions", counts["D", default: 0]),
        ("operations failed by a restart or a cut (unavailable, lost, timedOut)", counts["e", default: 0]),
      ]
    }

    private static func checkMailbox(
      logs: String, sent: Set<String>, server: PostgresTestServer, report: inout Chaos.Report
    ) throws {
      let (received, repeats) = try report.readReceiverLogs(in: logs)
      let lost = sent.subtracting(received)
      if !lost.isEmpty { report.violation("mailbox: \(lost.count) messages lost, e.g. \(lost.sorted().prefix(5))") }
      let left = try count("SELECT count(*) FROM liaison.mailbox_message WHERE namespace = 'chaos'", server)
      if left != 0 { report.violation("mailbox: \(left) messages left undelivered or quarantined") }
      report.figures += [
        ("messages recorded as sent", sent.count), ("distinct messages received", received.count),
        ("messages delivered again (after a kill, restart or cut)", repeats),
      ]
    }
  }
#endif
