// liaison-bench postgres-scale: how the PostgreSQL parts grow with the number of client
// processes — a mailbox's throughput and latency with N senders, a lock's hand-off along N
// waiters, a signal's fan-out to N observers — each beside the same work done with bare SQL on
// postgres-nio connections, in the same run on the same server.
//
//   swift run -c release --traits Postgres liaison-bench postgres-scale [--url URL] [--processes 1,4,16,64]
//
// Without --url, it starts a throwaway PostgreSQL server (fsync on) and removes it at the end.
// Each process is this program started again as a peer (`--peer pg-scale-…`), with its own
// container or bare connection. Liaison's processes and the bare ones do not run at once: 64 of
// each would pass the server's 200 connections. PostgreSQL's NOTIFY takes one lock for the whole
// server at each commit that notifies, which the senders' and posters' figures show as they grow.

import Foundation

#if Postgres
  import LiaisonPostgres
  import LiaisonTestSupport
  import PostgresNIO

  enum PostgresScale {
    static let usage =
      "usage: liaison-bench postgres-scale [--url postgres://USER@HOST:PORT/DATABASE] [--processes 1,4,16,64]"

    /// Messages per mailbox sample, shared among the senders (divisible by 1, 4, 16 and 64).
    static let messages = 1_920
    /// The advisory lock of the bare waiters (the floors' class, PostgresScenarios.floorClass).
    static let rawLockID: Int32 = 3

    struct Row {
      let scenario: String
      let processes: Int
      let liaison: Measurement
      let raw: Measurement
      let unit: String
      /// PgQueuer's figure for the same work (N producer processes, one worker), when it ran.
      var pgqueuer: Measurement? = nil
    }

    static func main(_ arguments: [String]) -> Int32 {
      var url: String?
      var counts = [1, 4, 16, 64]
      var rest = arguments[...]
      while let argument = rest.popFirst() {
        switch argument {
        case "--url": url = rest.popFirst()
        case "--processes":
          counts = (rest.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        case "--help", "-h":
          print(usage)
          return 0
        default:
          FileHandle.standardError.write(Data((usage + "\n").utf8))
          return 64
        }
      }
      guard !counts.isEmpty, counts.allSatisfy({ $0 <= 64 }) else {
        FileHandle.standardError.write(Data("liaison-bench postgres-scale: --processes takes 1 to 64 each\n".utf8))
        return 64
      }
      do {
        try run(url: url, counts: counts)
        return 0
      } catch {
        FileHandle.standardError.write(Data("liaison-bench postgres-scale: \(error)\n".utf8))
        return 1
      }
    }

    private static func run(url given: String?, counts: [Int]) throws {
      var server: PostgresTestServer?
      defer { server?.remove() }
      let url: String
      if let given {
        url = given
      } else {
        let started = try PostgresTestServer.start(durable: true)
        server = started
        url = started.url + "?sslmode=disable"
      }
      let namespace = "liaison-scale-\(getpid())"
      print("server: \(server.map { "a throwaway PostgreSQL (fsync on) at \($0.url)" } ?? url)\n")
      defer { if given != nil { PostgresScenarios.deleteRows(url: url, namespace: namespace) } }
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      defer { _ = try? blocking { await container.close() } }
      let jobQueue = JobQueuePeer.locate()
      if case .failure(let reason) = jobQueue { FileHandle.standardError.write(Data("\(reason)\n".utf8)) }
      var rows: [Row] = []
      for count in counts {
        var mailboxRows = try mailbox(container, url: url, namespace: namespace, senders: count)
        if case .success(let peer) = jobQueue {
          do {
            let figures = try peer.run(
              library: "pgqueuer", url: url,
              ["--figures", "producers", "--producers", String(count), "--jobs", String(messages)])
            for figure in figures {
              let index = figure.name.hasSuffix("-latency") ? 1 : 0
              mailboxRows[index].pgqueuer = Measurement(figure.name, figure.samples)
            }
          } catch {
            FileHandle.standardError.write(Data("pgqueuer peer: failed, its figures are missing: \(error)\n".utf8))
          }
        }
        rows += mailboxRows
        rows.append(try handoff(container, url: url, namespace: namespace, waiters: count))
        rows.append(try fanOut(container, url: url, namespace: namespace, observers: count))
        FileHandle.standardError.write(Data("measured with \(count) processes\n".utf8))
      }
      print(table(rows.sorted { ($0.scenario, $0.processes) < ($1.scenario, $1.processes) }))
    }

    // MARK: Mailbox: N senders, one receiver

    /// N sender processes at once, each sending its share of ``messages`` one at a time, each
    /// message carrying the time it was sent; one receiver here, receiving and acknowledging in
    /// batches of up to 100 as they come. Throughput: messages from the start to the last
    /// acknowledgement; latency: each message's send until this process has it. The bare form:
    /// the same statements (LiaisonPostgres's send function; its read and remove) on bare
    /// connections, the receiver polling every millisecond when it finds nothing.
    static func mailbox(_ container: PostgresContainer, url: String, namespace: String, senders: Int) throws -> [Row] {
      let share = messages / senders
      let name = "scale-\(senders)"
      let mailbox = try blocking { try await container.mailbox(name, sender: "bench") }
      let receiver = try blocking { try await mailbox.receiver() }
      defer { _ = try? blocking { await receiver.close() } }
      var throughput: [Double] = []
      var latency: [Double] = []
      do {
        let peers = try (0..<senders).map { _ in
          try BenchPeer("pg-scale-sender", [url, namespace, name, String(share)])
        }
        for _ in 0..<3 {
          let start = now()
          for peer in peers { peer.send(UInt8(ascii: "g")) }
          let waits = try blocking {
            var waits: [Double] = []
            while waits.count < share * senders {
              let batch = try await receiver.receive(String.self, limit: 100, timeout: .seconds(60))
              let at = now()
              waits += batch.map { Double(at &- (UInt64($0.payload) ?? at)) }
              try await receiver.acknowledge(batch)
            }
            return waits
          }
          throughput.append(Double(waits.count) / (Double(now() - start) / 1e9))
          latency += waits
          for peer in peers { _ = peer.readByte() }
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("a sender: \(ending)") } }
      }
      var rawThroughput: [Double] = []
      var rawLatency: [Double] = []
      do {
        let peers = try (0..<senders).map { _ in try BenchPeer("pg-scale-raw-sender", [url, namespace, String(share)]) }
        let reader = try blocking { try await RawPostgres.connect(url) }
        defer { _ = try? blocking { try await reader.close() } }
        var cursor: Int64 = try blocking {
          try await reader.query(
            """
            SELECT coalesce(max(position), 0) FROM liaison.mailbox_message
            WHERE namespace = \(namespace) AND mailbox = \(PostgresMailboxScenarios.rawMailbox)
            """, logger: RawPostgres.logger
          ).collect().first!.decode(Int64.self)
        }
        for _ in 0..<3 {
          let start = now()
          for peer in peers { peer.send(UInt8(ascii: "g")) }
          let from = cursor
          let (after, waits) = try blocking {
            var (cursor, waits) = (from, [Double]())
            while waits.count < share * senders {
              var payloads: [Data] = []
              cursor = try await PostgresMailboxScenarios.rawReceive(reader, namespace: namespace, after: cursor) {
                payloads.append($0)
              }
              let at = now()
              waits += payloads.map { Double(at &- (UInt64(String(decoding: $0, as: UTF8.self)) ?? at)) }
              if payloads.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
            }
            return (cursor, waits)
          }
          cursor = after
          rawThroughput.append(Double(waits.count) / (Double(now() - start) / 1e9))
          rawLatency += waits
          for peer in peers { _ = peer.readByte() }
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("a bare sender: \(ending)") } }
      }
      return [
        Row(
          scenario: "mailbox: N senders, \(messages) messages one at a time, one receiver", processes: senders,
          liaison: Measurement("scale.pg.mailbox.throughput", throughput),
          raw: Measurement("scale.pg.raw.mailbox.throughput", rawThroughput), unit: "msgs/s"),
        Row(
          scenario: "mailbox: N senders, a message's send until the receiver has it", processes: senders,
          liaison: Measurement("scale.pg.mailbox.latency", latency),
          raw: Measurement("scale.pg.raw.mailbox.latency", rawLatency), unit: "ns"),
      ]
    }

    /// The sender peer: on `g`, sends `count` messages one at a time, each its send time, and
    /// answers `d`.
    static func send(url: String, namespace: String, name: String, count: Int, input: CInt, output: CInt) throws
      -> Never
    {
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      let mailbox = try blocking { try await container.mailbox(name, sender: "sender") }
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        try blocking {
          for _ in 0..<count { _ = try await mailbox.send(String(now())) }
        }
        writeBytes(output, [UInt8(ascii: "d")])
      }
    }

    /// The bare sender peer: the same with LiaisonPostgres's send function on a bare connection.
    static func sendRaw(url: String, namespace: String, count: Int, input: CInt, output: CInt) throws -> Never {
      let connection = try blocking { try await RawPostgres.connect(url) }
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        try blocking {
          for _ in 0..<count {
            try await PostgresMailboxScenarios.rawSend(
              connection, namespace: namespace, payloads: [Data(String(now()).utf8)])
          }
        }
        writeBytes(output, [UInt8(ascii: "d")])
      }
    }

    // MARK: Lock: a hand-off along N waiters

    /// N processes wait for a lock held here, each on the server; it is released, and each takes
    /// it, answers the time, and lets it go for the next: the time from the release until the
    /// last has had it, per waiter. The bare form: `pg_advisory_lock` on bare connections.
    static func handoff(_ container: PostgresContainer, url: String, namespace: String, waiters: Int) throws -> Row {
      let name = "scale-chain-\(waiters)"
      let lock = try container.lock(name)
      let poll = try blocking { try await RawPostgres.connect(url) }
      defer { _ = try? blocking { try await poll.close() } }
      var liaison: [Double] = []
      do {
        let peers = try (0..<waiters).map { _ in try BenchPeer("pg-scale-waiter", [url, namespace, name]) }
        let id = try blocking {
          await (try await lock.lock()).unlock()
          return try await PostgresScenarios.lockRowID(poll, namespace: namespace, name: name)
        }
        for _ in 0..<5 {
          let held = try blocking { try await lock.lock() }
          for peer in peers { peer.send(UInt8(ascii: "g")) }
          try blocking {
            try await PostgresScenarios.waitForWaiter(
              poll, classID: PostgresScenarios.liaisonLockClass, objectID: id, count: waiters, seconds: 60)
          }
          let releasedAt = now()
          _ = try blocking { await held.unlock() }
          let last = peers.map { $0.readTimestamp() }.max()!
          liaison.append(Double(last - releasedAt) / Double(waiters))
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("a waiter: \(ending)") } }
      }
      var raw: [Double] = []
      do {
        let peers = try (0..<waiters).map { _ in try BenchPeer("pg-scale-raw-waiter", [url]) }
        let holder = try blocking { try await RawPostgres.connect(url) }
        defer { _ = try? blocking { try await holder.close() } }
        let floorClass = PostgresScenarios.floorClass
        for _ in 0..<5 {
          try blocking {
            _ = try await holder.query(
              "SELECT pg_advisory_lock(\(floorClass), \(rawLockID))", logger: RawPostgres.logger
            ).collect()
          }
          for peer in peers { peer.send(UInt8(ascii: "g")) }
          try blocking {
            try await PostgresScenarios.waitForWaiter(
              poll, classID: floorClass, objectID: rawLockID, count: waiters, seconds: 60)
          }
          let releasedAt = now()
          try blocking {
            _ = try await holder.query(
              "SELECT pg_advisory_unlock(\(floorClass), \(rawLockID))", logger: RawPostgres.logger
            ).collect()
          }
          let last = peers.map { $0.readTimestamp() }.max()!
          raw.append(Double(last - releasedAt) / Double(waiters))
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("a bare waiter: \(ending)") } }
      }
      return Row(
        scenario: "lock: a hand-off along N waiting processes, per waiter", processes: waiters,
        liaison: Measurement("scale.pg.lock.handoff", liaison), raw: Measurement("scale.pg.raw.handoff", raw),
        unit: "ns")
    }

    /// The waiter peer: on `g`, locks (waiting), answers the time it has the lock, and unlocks.
    static func wait(url: String, namespace: String, name: String, input: CInt, output: CInt) throws -> Never {
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      let lock = try container.lock(name)
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        let held = try blocking { try await lock.lock() }
        writeBytes(output, encodeTimestamp(now()))
        _ = try blocking { await held.unlock() }
      }
    }

    /// The bare waiter peer: the same with `pg_advisory_lock` on a bare connection.
    static func waitRaw(url: String, input: CInt, output: CInt) throws -> Never {
      let connection = try blocking { try await RawPostgres.connect(url) }
      let floorClass = PostgresScenarios.floorClass
      writeBytes(output, [UInt8(ascii: "r")])
      while true {
        _ = readBytes(input, 1)
        try blocking {
          _ = try await connection.query(
            "SELECT pg_advisory_lock(\(floorClass), \(rawLockID))", logger: RawPostgres.logger
          ).collect()
        }
        writeBytes(output, encodeTimestamp(now()))
        try blocking {
          _ = try await connection.query(
            "SELECT pg_advisory_unlock(\(floorClass), \(rawLockID))", logger: RawPostgres.logger
          ).collect()
        }
      }
    }

    // MARK: Signal: a fan-out to N observers

    /// A post here, until the last of N observer processes has it (each answers how long after
    /// the post). The bare form: `NOTIFY` to N processes that `LISTEN` on bare connections.
    static func fanOut(_ container: PostgresContainer, url: String, namespace: String, observers: Int) throws -> Row {
      let name = "scale-fan-\(observers)"
      let signal = try container.signal(name)
      var liaison: [Double] = []
      do {
        let peers = try (0..<observers).map { _ in try BenchPeer("pg-signal-observer", [url, namespace, name]) }
        for _ in 0..<30 {
          try blocking { try await signal.post(state: now()) }
          liaison.append(Double(peers.map { $0.readTimestamp() }.max()!))
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("an observer: \(ending)") } }
      }
      var raw: [Double] = []
      do {
        let peers = try (0..<observers).map { _ in try BenchPeer("pg-raw-listener", [url]) }
        let notifier = try blocking { try await RawPostgres.connect(url) }
        defer { _ = try? blocking { try await notifier.close() } }
        for _ in 0..<30 {
          try blocking {
            _ = try await notifier.query(
              PostgresQuery(unsafeSQL: "NOTIFY \(PostgresScenarios.floorChannel), '\(now())'"),
              logger: RawPostgres.logger
            ).collect()
          }
          raw.append(Double(peers.map { $0.readTimestamp() }.max()!))
        }
        for peer in peers { if let ending = peer.stop() { throw BenchError("a bare listener: \(ending)") } }
      }
      return Row(
        scenario: "signal: a post until the last of N observing processes has it", processes: observers,
        liaison: Measurement("scale.pg.signal.fan-out", liaison), raw: Measurement("scale.pg.raw.fan-out", raw),
        unit: "ns")
    }

    // MARK: Peers and the table

    /// The peer roles of these scenarios (`liaison-bench --peer pg-scale-…`).
    static func peer(_ role: String, _ arguments: [String], input: CInt, output: CInt) throws -> Never {
      switch role {
      case "pg-scale-sender":
        try send(
          url: arguments[0], namespace: arguments[1], name: arguments[2], count: Int(arguments[3])!, input: input,
          output: output)
      case "pg-scale-raw-sender":
        try sendRaw(url: arguments[0], namespace: arguments[1], count: Int(arguments[2])!, input: input, output: output)
      case "pg-scale-waiter":
        try wait(url: arguments[0], namespace: arguments[1], name: arguments[2], input: input, output: output)
      case "pg-scale-raw-waiter":
        try waitRaw(url: arguments[0], input: input, output: output)
      default:
        fatalError("unknown peer role \(role)")
      }
    }

    /// The rows as a Markdown table: each figure beside the bare form's, and how each grows from
    /// the fewest processes.
    static func table(_ rows: [Row]) -> String {
      func figure(_ value: Double, _ unit: String) -> String {
        if unit != "ns" { return String(format: "%.0f %@", value, unit) }
        return value >= 1_000_000
          ? String(format: "%.2f ms", value / 1e6)
          : String(format: "%.1f µs", value / 1e3)
      }
      var lines = [
        "| Scenario | Processes | Liaison median (p99) | Bare SQL median (p99) | Liaison ÷ bare "
          + "| PgQueuer median (p99) | Liaison vs the fewest | Samples |",
        "|---|---|---|---|---|---|---|---|",
      ]
      var first: [String: Double] = [:]
      for row in rows {
        let base = first[row.scenario] ?? row.liaison.median
        first[row.scenario] = base
        let pgqueuer = row.pgqueuer.map { "\(figure($0.median, row.unit)) (\(figure($0.p99, row.unit)))" } ?? "–"
        lines.append(
          "| \(row.scenario) | \(row.processes) | \(figure(row.liaison.median, row.unit)) "
            + "(\(figure(row.liaison.p99, row.unit))) | \(figure(row.raw.median, row.unit)) "
            + "(\(figure(row.raw.p99, row.unit))) | " + String(format: "%.2f×", row.liaison.median / row.raw.median)
            + " | \(pgqueuer) | " + String(format: "%.2f×", row.liaison.median / base) + " | \(row.liaison.samples) |")
      }
      return lines.joined(separator: "\n")
    }
  }
#else
  enum PostgresScale {
    static func main(_ arguments: [String]) -> Int32 {
      FileHandle.standardError.write(
        Data(
          ("liaison-bench postgres-scale: this bench was built without the package trait `Postgres`; run it with "
            + "`swift run -c release --traits Postgres liaison-bench postgres-scale`\n").utf8))
      return 64
    }
  }
#endif
