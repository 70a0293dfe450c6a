import Foundation
import GRDB
import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `liaison-bench chaos`: worker processes do random operations on every part for a while; one
/// at a time is killed with SIGKILL at random moments and started again; then the promises are
/// checked.
///
/// Each worker loops over: a hold of one lock, a claim of one presence, a transaction on two
/// defaults keys, a mailbox send with its own id, a database transaction, a signal post. Worker 0
/// is the mailbox's receiver instead. Workers log what they did to a file per incarnation (one
/// `write` per line, which a SIGKILL cannot cut), and the invariants are checked from the logs
/// and the stores:
///
/// - **mutual exclusion**: no two lock holds (nor presence claims) overlap in time; a hold cut by
///   a kill counts as lasting until the kill was sent, which can only make an overlap *less*
///   likely to be seen as one, never invent one;
/// - **exact counters**: the defaults total equals the sum of the per-worker counts written in
///   the same transactions; the database's rows per worker equal its per-worker count row;
/// - **no message lost**: every message a sender recorded as sent was received, and a message
///   received twice was unacknowledged when its receiver was killed;
/// - **every store opens** and passes SQLite's `integrity_check`; the signal's file reads.
enum Chaos {
  struct Options {
    var processes = 6
    var seconds = 20.0
    var seed = UInt64.random(in: 0...UInt64.max)
    /// Break the workers on purpose (no lock, a message not logged, a count not kept), to show
    /// that the checks catch it.
    var sabotage = false
    /// Run on a throwaway PostgreSQL server, restarted at random, with a network cut at random
    /// (``PostgresChaos``); needs the package trait `Postgres` and root.
    var postgres = false
    /// With `postgres`: every worker goes through a PgBouncer in transaction mode with
    /// `pool_mode=transaction` (leases, polled notifications), and the pooler is restarted at
    /// random instead of a network being cut.
    var pooled = false
  }

  static func parse(_ arguments: [String]) -> Options? {
    var options = Options()
    var rest = arguments[...]
    while let flag = rest.popFirst() {
      switch flag {
      case "--sabotage":
        options.sabotage = true
        continue
      case "--postgres":
        options.postgres = true
        continue
      case "--pooled":
        options.postgres = true
        options.pooled = true
        continue
      default: break
      }
      guard let value = rest.popFirst() else { return nil }
      switch flag {
      case "--processes":
        guard let n = Int(value), n >= 2, n <= 64 else { return nil }
        options.processes = n
      case "--seconds":
        guard let s = Double(value), s > 0, s <= 86_400 else { return nil }
        options.seconds = s
      case "--seed":
        guard let s = UInt64(value) else { return nil }
        options.seed = s
      default: return nil
      }
    }
    return options
  }

  static let usage =
    "usage: liaison-bench chaos [--processes N (2-64, default 6)] [--seconds S (default 20)] [--seed N] [--sabotage] [--postgres]"
    + " [--pooled (PostgreSQL through PgBouncer in transaction mode)]"

  // MARK: The run

  /// Runs the chaos and returns the number of violations found.
  static func run(_ options: Options) throws -> Int {
    let work = NSTemporaryDirectory() + "liaison-chaos-\(getpid())"
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: work) }
    let containerPath = work + "/container"
    var random = SplitMix64(seed: options.seed)
    print("chaos: \(options.processes) processes for \(options.seconds) s, seed \(options.seed)")
    if options.sabotage {
      print("chaos: SABOTAGED workers (no lock, messages not logged, counts not kept): violations expected")
      setenv(sabotageVariable, "1", 1)  // inherited by the workers
    }

    var workers = try (0..<options.processes).map { index in
      try Worker(index: index, incarnation: 0, place: containerPath, logs: work, seed: random.next())
    }
    var killTimes: [String: UInt64] = [:]  // log file → when its process was sent SIGKILL
    let deadline = now() + UInt64(options.seconds * 1e9)
    var kills = 0
    var selfEnded: [String] = []  // workers that ended without being killed: each is a violation
    while now() < deadline {
      usleep(UInt32(random.next() % 300_000 + 50_000))  // the chaos's own rhythm, not a synchronisation
      let victim = Int(random.next() % UInt64(workers.count))
      let (sentAt, endedByItself) = workers[victim].kill()
      killTimes[workers[victim].log] = sentAt
      if let endedByItself { selfEnded.append(endedByItself) }
      kills += 1
      workers[victim] = try Worker(
        index: victim, incarnation: workers[victim].incarnation + 1, place: containerPath, logs: work,
        seed: random.next())
    }
    // The senders stop between operations; then the receiver drains the mailbox and stops.
    for worker in workers.dropFirst() { selfEnded += [worker.stop()].compactMap { $0 } }
    let container = try SharedContainer(directory: containerPath, createIfMissing: true)
    let inbox = try container.mailbox("chaos-inbox")
    let drainDeadline = now() + 60_000_000_000
    while try inbox.count() > 0, now() < drainDeadline { usleep(10_000) }
    selfEnded += [workers[0].stop()].compactMap { $0 }

    var report = Report()
    for ending in selfEnded { report.violation(ending) }
    try report.checkHolds(logs: work, killTimes: killTimes)
    try report.checkCounters(container)
    try report.checkMailbox(container, logs: work, senders: options.processes - 1)
    try report.checkStores(container, path: containerPath)
    report.print(kills: kills)
    return report.violations.count
  }

  // MARK: A worker process

  /// A worker process: a ``BenchPeer`` in the `chaos-worker` role, and the log of this incarnation.
  struct Worker {
    let index: Int
    let incarnation: Int
    let log: String
    let peer: BenchPeer

    /// Starts worker `index` in the peer role `role` (on a folder: `chaos-worker`), on `place`;
    /// `launcher` wraps its command (to run it in a network namespace).
    init(
      role: String = "chaos-worker", index: Int, incarnation: Int, place: String, logs: String, seed: UInt64,
      launcher: @escaping ([String]) -> [String] = { $0 }
    ) throws {
      self.index = index
      self.incarnation = incarnation
      log = logs + "/worker-\(index)-\(incarnation).log"
      peer = try BenchPeer(role, [place, log, String(index), String(seed)], launcher: launcher)
    }

    func kill() -> (sentAt: UInt64, endedByItself: String?) {
      let (sentAt, ending) = peer.kill()
      return (sentAt, ending.map { "worker \(index) (\(log)): \($0)" })
    }

    func stop() -> String? { peer.stop().map { "worker \(index) (\(log)): \($0)" } }

    /// Stops the worker, killing it if it has not ended within `seconds`; says how it ended, with
    /// the last line of its log, unless it ended cleanly.
    func stop(within seconds: Double) -> String? {
      peer.stop(within: seconds).map { ending in
        let last = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").last ?? ""
        return "worker \(index) (\(log)): \(ending); its log ends with '\(last)'"
      }
    }
  }

  /// What a worker sends.
  struct Message: Codable, Sendable {
    let worker: Int
    let sequence: Int
  }

  static let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(
        sql: """
          CREATE TABLE event (id INTEGER PRIMARY KEY, worker INTEGER NOT NULL);
          CREATE TABLE tally (worker INTEGER PRIMARY KEY, events INTEGER NOT NULL);
          """)
    }
    return migrator
  }()

  static let sabotageVariable = "LIAISON_CHAOS_SABOTAGE"
  static var sabotaged: Bool { getenv(sabotageVariable) != nil }

  /// A worker's life: random operations until its input closes (or it is killed).
  static func work(container path: String, log: String, index: Int, seed: UInt64) throws -> Never {
    let container = try SharedContainer(directory: path, createIfMissing: true)
    let note = logger(log)
    if index == 0 { try receive(container, note: note) }
    let stopping = Locked(false)
    Thread.detachNewThread {
      waitForEndOfInput()
      stopping.withLock { $0 = true }
    }

    let lock = try container.lock("chaos-lock")
    let presence = try container.presence("chaos-presence")
    let signal = try container.signal("chaos-signal")
    let defaults = try container.defaults("chaos")
    let inbox = try container.mailbox("chaos-inbox", sender: "w\(index)")
    let database = try container.database("chaos", migrator: migrator)
    let total = DefaultsKey<Int>("total")
    let mine = try DefaultsKey<Int>(validating: "count-w\(index)")
    let sent = try DefaultsKey<Int>(validating: "sent-w\(index)")
    var random = SplitMix64(seed: seed)
    writeBytes(FileHandle.standardOutput.fileDescriptor, [UInt8(ascii: "r")])

    while !stopping.withLock({ $0 }) {
      switch random.next() % 6 {
      case 0:
        let held = sabotaged ? nil : try lock.lock()
        note("L \(now())")
        usleep(UInt32(random.next() % 500))  // work under the lock
        note("X \(now())")
        held?.unlock()
      case 1:
        if let claim = try claimUnlessHeld(presence) {
          note("P \(now())")
          usleep(UInt32(random.next() % 500))
          note("Y \(now())")
          claim.release()
        } else {
          note("p")
        }
      case 2:
        try defaults.transaction { transaction in
          try transaction.set((try transaction.get(total) ?? 0) + 1, for: total)
          let skip = sabotaged && random.next() % 50 == 0
          try transaction.set((try transaction.get(mine) ?? 0) + (skip ? 0 : 1), for: mine)
        }
        note("D")
      case 3:
        // The next sequence number is stored after each send; a send whose number was not stored
        // (killed in between) is sent again with the same id after the restart: stored once.
        let sequence = try defaults.get(sent) ?? 0
        try inbox.send(Message(worker: index, sequence: sequence), id: "w\(index)-\(sequence)")
        try defaults.set(sequence + 1, for: sent)
        note("M")
      case 4:
        try database.pool.write { db in
          try db.execute(sql: "INSERT INTO event (worker) VALUES (?)", arguments: [index])
          try db.execute(
            sql:
              "INSERT INTO tally (worker, events) VALUES (?, 1) ON CONFLICT (worker) DO UPDATE SET events = events + 1",
            arguments: [index])
        }
        note("B")
      default:
        try signal.post(state: random.next())
        note("S")
      }
    }
    exit(0)
  }

  /// Appends a line to the log at `path`, in one `write`, which a SIGKILL cannot cut.
  static func logger(_ path: String) -> @Sendable (String) -> Void {
    let logFile = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    precondition(logFile >= 0, "cannot open \(path)")
    return { line in
      let bytes = Array((line + "\n").utf8)
      precondition(write(logFile, bytes, bytes.count) == bytes.count, "cannot write \(path)")
    }
  }

  /// A claim of `presence`, or `nil` when another process holds it.
  static func claimUnlessHeld(_ presence: Presence) throws(LiaisonError) -> PresenceClaim? {
    do {
      return try presence.claim()
    } catch {
      guard error.code == .alreadyClaimed else { throw error }
      return nil
    }
  }

  /// Worker 0: the mailbox's receiver. Logs each batch ("R id" lines, one write) before
  /// acknowledging it, and "A" after; stops when its input closes.
  static func receive(_ container: SharedContainer, note: @escaping @Sendable (String) -> Void) throws -> Never {
    let receiver = try container.mailbox("chaos-inbox").receiver()
    let done = DispatchSemaphore(value: 0)
    let receiving = Task.detached {
      defer { done.signal() }
      do {
        while true {
          try await handle(try await receiver.receive(Message.self, limit: 32), of: receiver, note: note)
        }
      } catch let error as LiaisonError where error.code == .cancelled {
      } catch {
        note("E \(error)")
      }
    }
    writeBytes(FileHandle.standardOutput.fileDescriptor, [UInt8(ascii: "r")])
    waitForEndOfInput()
    receiving.cancel()
    done.wait()
    exit(0)
  }

  /// What a receiver does with a batch, on a folder and on PostgreSQL: logs it ("R id" lines, in
  /// one write; a sabotaged receiver leaves out the ids that end in 7), acknowledges it, then
  /// logs "A".
  static func handle<Payload>(
    _ batch: [MailboxEnvelope<Payload>], of receiver: some CoordinationReceiver, note: (String) -> Void
  ) async throws {
    let logged = sabotaged ? batch.filter { !$0.id.hasSuffix("7") } : batch
    note(logged.map { "R \($0.id)" }.joined(separator: "\n"))
    try await receiver.acknowledge(batch, timeout: nil)
    note("A")
  }

  // MARK: Checking

  struct Report {
    var violations: [String] = []
    var figures: [(String, Int)] = []

    mutating func violation(_ text: String) { violations.append(text) }

    /// No two holds of the lock, nor two claims of the presence, overlap.
    mutating func checkHolds(logs: String, killTimes: [String: UInt64]) throws {
      var spans: [Character: [(enter: UInt64, exit: UInt64, log: String)]] = ["L": [], "P": []]
      var operations: [Character: Int] = [:]
      for file in try FileManager.default.contentsOfDirectory(atPath: logs) where file.hasSuffix(".log") {
        let path = logs + "/" + file
        var open: (kind: Character, enter: UInt64)?
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
          guard let kind = line.first else { continue }
          operations[kind, default: 0] += 1
          let time = UInt64(line.dropFirst(2)) ?? 0
          switch kind {
          case "L", "P": open = (kind, time)
          case "X", "Y":
            guard let started = open else {
              violation("\(file): an end without a start")
              continue
            }
            spans[started.kind]!.append((started.enter, time, file))
            open = nil
          default: break
          }
        }
        if let started = open {
          // Cut by the kill: held at least until the kill was sent.
          guard let killed = killTimes[path] else {
            violation("\(file): a hold that never ended, in a process that was not killed")
            continue
          }
          spans[started.kind]!.append((started.enter, max(killed, started.enter), file))
        }
      }
      for (kind, name) in [("L", "lock holds"), ("P", "presence claims")] as [(Character, String)] {
        let sorted = spans[kind]!.sorted { $0.enter < $1.enter }
        for (earlier, later) in zip(sorted, sorted.dropFirst()) where later.enter < earlier.exit {
          violation("\(name) overlap: \(earlier.log) held until \(earlier.exit), \(later.log) from \(later.enter)")
        }
        figures.append((name, sorted.count))
      }
      figures += [
        ("presence claims refused (held elsewhere)", operations["p"] ?? 0),
        ("defaults transactions", operations["D"] ?? 0), ("mailbox sends", operations["M"] ?? 0),
        ("database transactions", operations["B"] ?? 0), ("signal posts", operations["S"] ?? 0),
        ("messages received (with repeats)", operations["R"] ?? 0),
      ]
    }

    /// The defaults total and the database's rows match their per-worker counts.
    mutating func checkCounters(_ container: SharedContainer) throws {
      let defaults = try container.defaults("chaos")
      let snapshot = try defaults.snapshot()
      func number(_ key: String) -> Int {
        guard case .json(let json)? = snapshot[key] else { return 0 }
        return Int(String(decoding: json, as: UTF8.self)) ?? -1
      }
      let perWorker = snapshot.keys.filter { $0.hasPrefix("count-w") }.map(number).reduce(0, +)
      if number("total") != perWorker {
        violation("defaults: total \(number("total")) ≠ sum of per-worker counts \(perWorker)")
      }
      let database = try container.database("chaos", migrator: migrator)
      let mismatches = try database.pool.read { db in
        try Int.fetchOne(
          db,
          sql: """
            SELECT count(*) FROM tally
            WHERE events != (SELECT count(*) FROM event WHERE event.worker = tally.worker)
            """) ?? 0
      }
      if mismatches > 0 { violation("database: \(mismatches) workers' tallies differ from their rows") }
    }

    /// Every message recorded as sent was received; repeats only of unacknowledged messages.
    mutating func checkMailbox(_ container: SharedContainer, logs: String, senders: Int) throws {
      let defaults = try container.defaults("chaos")
      var expected: Set<String> = []
      for worker in 1...senders {
        let sent = try defaults.get(DefaultsKey<Int>(validating: "sent-w\(worker)")) ?? 0
        for sequence in 0..<sent { expected.insert("w\(worker)-\(sequence)") }
      }
      let (received, repeats) = try readReceiverLogs(in: logs)
      let lost = expected.subtracting(received)
      if !lost.isEmpty { violation("mailbox: \(lost.count) messages lost, e.g. \(lost.sorted().prefix(5))") }
      let inbox = try container.mailbox("chaos-inbox")
      if try inbox.count() != 0 { violation("mailbox: \(try inbox.count()) messages left undelivered") }
      if !(try inbox.peek()).isEmpty { violation("mailbox: quarantined messages") }
      figures += [
        ("messages recorded as sent", expected.count), ("distinct messages received", received.count),
        ("messages delivered again after a kill", repeats),
      ]
    }

    /// The receiver's logs (worker 0's incarnations, in order): the distinct messages received,
    /// and how many were received again. A message received again after its acknowledgement
    /// ("A" after its batch) is a violation; after an "e" line (an acknowledgement that failed,
    /// and may or may not have committed) its batch counts as unacknowledged.
    mutating func readReceiverLogs(in logs: String) throws -> (received: Set<String>, repeats: Int) {
      let receiverLogs = try FileManager.default.contentsOfDirectory(atPath: logs)
        .filter { $0.hasPrefix("worker-0-") }
        .sorted { Int($0.split(separator: "-")[2].dropLast(4))! < Int($1.split(separator: "-")[2].dropLast(4))! }
      var received: Set<String> = []
      var unacknowledged: Set<String> = []
      var repeats = 0
      for file in receiverLogs {
        var batch: [String] = []
        for line in try String(contentsOfFile: logs + "/" + file, encoding: .utf8).split(separator: "\n") {
          if line == "A" {
            unacknowledged.subtract(batch)
            batch = []
          } else if line.hasPrefix("E ") {
            violation("the receiver failed: \(line.dropFirst(2))")
          } else if line.hasPrefix("e ") {
            batch = []
          } else if line.hasPrefix("R ") {
            let id = String(line.dropFirst(2))
            if received.contains(id) {
              repeats += 1
              if !unacknowledged.contains(id) { violation("mailbox: \(id) delivered again after its acknowledgement") }
            }
            received.insert(id)
            unacknowledged.insert(id)
            batch.append(id)
          }
        }
      }
      return (received, repeats)
    }

    /// Every store opens and passes `PRAGMA integrity_check`; the signal's file reads.
    mutating func checkStores(_ container: SharedContainer, path: String) throws {
      for file in [
        ".liaison/store/defaults.sqlite", ".liaison/store/mailboxes.sqlite", ".liaison/databases/chaos.sqlite",
      ] {
        let queue = try DatabaseQueue(path: path + "/" + file)
        let result = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
        if result != ["ok"] { violation("\(file): integrity_check says \(result)") }
      }
      do {
        _ = try container.signal("chaos-signal").state
      } catch {
        violation("the signal's file does not read: \(error)")
      }
    }

    func print(kills: Int) {
      Swift.print("chaos: \(kills) processes killed with SIGKILL and restarted")
      for (name, count) in figures { Swift.print("  \(name): \(count)") }
      Swift.print("chaos: \(violations.count) violations")
      for violation in violations { Swift.print("  VIOLATION: \(violation)") }
    }
  }
}

extension Chaos {
  /// Returns when standard input closes: the orchestrator's request to stop. (`readBytes` would
  /// end the process there and then, in the middle of an operation.)
  static func waitForEndOfInput() {
    var byte: UInt8 = 0
    while true {
      let n = read(FileHandle.standardInput.fileDescriptor, &byte, 1)
      if n == 0 || (n < 0 && errno != EINTR) { return }
    }
  }
}

/// A small seeded generator, so that a run can be repeated with its seed.
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
