import Foundation
import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `liaison-bench scale`: the cost of one operation as the work grows — processes contending for
/// one lock or observing one signal (1 → 16), keys in a defaults domain (10 → 100,000), messages
/// waiting in a mailbox (0 → 100,000) — printed as a table, so that growth is visible.
enum ScaleScenarios {
  struct Row {
    let scenario: String
    let size: Int
    let median: Double
    let p99: Double
    let note: String
  }

  static let processCounts = [1, 2, 4, 8, 16]

  static func run(_ container: SharedContainer) throws -> [Row] {
    var rows: [Row] = []
    for count in processCounts { rows.append(try lockContention(container, processes: count)) }
    for count in processCounts { rows.append(try lockHandoffChain(container, waiters: count)) }
    for count in processCounts { rows.append(try signalFanOut(container, observers: count)) }
    for keys in [10, 10_000, 100_000] { rows += try defaults(container, keys: keys) }
    for backlog in [0, 1_000, 100_000] { rows += try mailbox(container, backlog: backlog) }
    return rows
  }

  /// N processes each take and release one lock 1,000 times at once: wall time per acquisition.
  static func lockContention(_ container: SharedContainer, processes: Int) throws -> Row {
    let cycles = 1_000
    let contenders = try (0..<processes).map { _ in
      try BenchPeer("lock-contender", [container.directory, "scale-lock", String(cycles)])
    }
    var samples: [Double] = []
    for _ in 0..<7 {
      let start = now()
      for contender in contenders { contender.send(UInt8(ascii: "g")) }
      let end = contenders.map { $0.readTimestamp() }.max()!
      samples.append(Double(end - start) / Double(processes * cycles))
    }
    let measurement = Measurement("scale.lock", samples)
    return Row(
      scenario: "lock: processes each locking 1,000 times at once, wall time per lock + unlock", size: processes,
      median: measurement.median, p99: measurement.p99, note: "7 runs")
  }

  /// N processes blocked waiting for a lock held here; released: they take it one after the
  /// other, and the time from the release until the last has had it, per process, is the cost of
  /// one hand-off with N waiters.
  static func lockHandoffChain(_ container: SharedContainer, waiters: Int) throws -> Row {
    let lock = try container.lock("scale-chain-\(waiters)")
    let peers = try (0..<waiters).map { _ in
      try BenchPeer("lock-waiter", [container.directory, "scale-chain-\(waiters)"])
    }
    var samples: [Double] = []
    for _ in 0..<50 {
      let held = try lock.lock()
      for peer in peers { peer.send(UInt8(ascii: "g")) }
      waitForBlockedWaiters(waiters)
      let releasedAt = now()
      held.unlock()
      let last = peers.map { $0.readTimestamp() }.max()!
      samples.append(Double(last - releasedAt) / Double(waiters))
    }
    let measurement = Measurement("scale.lock.chain", samples)
    return Row(
      scenario: "lock: processes blocked waiting, released: time per hand-off until all have had it", size: waiters,
      median: measurement.median, p99: measurement.p99, note: "50 releases")
  }

  /// The contender peer: on each byte, `cycles` × (lock, unlock); answers the time it finished.
  static func contend(container: String, name: String, cycles: Int, input: CInt, output: CInt) throws -> Never {
    let lock = try SharedContainer(directory: container, createIfMissing: true).lock(name)
    writeBytes(output, [UInt8(ascii: "r")])
    while readBytes(input, 1).count == 1 {
      for _ in 0..<cycles { try lock.lock().unlock() }
      writeBytes(output, encodeTimestamp(now()))
    }
    exit(0)
  }

  /// The waiter peer: on each byte, one blocking lock; answers the time it got it, then unlocks.
  static func waitForLock(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let lock = try SharedContainer(directory: container, createIfMissing: true).lock(name)
    writeBytes(output, [UInt8(ascii: "r")])
    while readBytes(input, 1).count == 1 {
      let held = try lock.lock()
      writeBytes(output, encodeTimestamp(now()))
      held.unlock()
    }
    exit(0)
  }

  /// One post, N observer processes: the time until the last of them has it.
  static func signalFanOut(_ container: SharedContainer, observers: Int) throws -> Row {
    let signal = try container.signal("scale-signal-\(observers)")
    let peers = try (0..<observers).map { _ in
      try BenchPeer("signal-observer", [container.directory, "scale-signal-\(observers)", "sequence"])
    }
    var samples: [Double] = []
    for _ in 0..<200 {
      try signal.post(state: now())
      samples.append(Double(peers.map { $0.readTimestamp() }.max()!))
    }
    let measurement = Measurement("scale.signal", samples)
    return Row(
      scenario: "signal: observer processes, post → the last one has it", size: observers,
      median: measurement.median, p99: measurement.p99, note: "200 posts")
  }

  /// A domain holding `keys` keys: a cached `get`, and a `set` of one of them.
  static func defaults(_ container: SharedContainer, keys: Int) throws -> [Row] {
    let defaults = try container.defaults("scale-\(keys)")
    let names = try (0..<keys).map { try DefaultsKey<Int>(validating: "key-\($0)") }
    for chunk in stride(from: 0, to: keys, by: 10_000) {
      try defaults.transaction { transaction in
        for index in chunk..<min(keys, chunk + 10_000) { try transaction.set(index, for: names[index]) }
      }
    }
    var random = SplitMix64(seed: 7)
    let hot = names[keys / 2]
    let changed = DefaultsKey<Int>("scale-changed")
    let samples = try interleave(
      samples: 200,
      [
        {
          _ = try defaults.get(hot)  // the other samples' writes emptied the cache: fill it again, untimed
          return try timeBatch(100) { _ = try defaults.get(hot) }
        },
        {
          try defaults.set(1, for: changed)  // a write empties every cache: the next get reads SQLite
          return try timeBatch(1) { _ = try defaults.get(names[Int(random.next() % UInt64(keys))]) }
        },
        { try timeBatch(10) { try defaults.set(1, for: names[Int(random.next() % UInt64(keys))]) } },
      ])
    let cached = Measurement("scale.defaults.get", samples[0])
    let uncached = Measurement("scale.defaults.get.uncached", samples[1])
    let set = Measurement("scale.defaults.set", samples[2])
    return [
      Row(
        scenario: "defaults: keys in the domain, get from the cache", size: keys, median: cached.median,
        p99: cached.p99, note: "200 × 100 gets"),
      Row(
        scenario: "defaults: keys in the domain, get of a random key after a write (from SQLite)", size: keys,
        median: uncached.median, p99: uncached.p99, note: "200 gets"),
      Row(
        scenario: "defaults: keys in the domain, set of a random key", size: keys, median: set.median, p99: set.p99,
        note: "200 × 10 sets"),
    ]
  }

  /// A mailbox with `backlog` messages waiting: one send, and one receive + acknowledge.
  static func mailbox(_ container: SharedContainer, backlog: Int) throws -> [Row] {
    let mailbox = try container.mailbox("scale-\(backlog)", sender: "bench")
    for _ in stride(from: 0, to: backlog, by: 1_000) {
      try mailbox.sendAll((0..<1_000).map { BenchMessage(n: $0, text: "backlog") })
    }
    let receiver = try mailbox.receiver()
    let message = BenchMessage(n: 1, text: "measured")
    let samples = try interleave(
      samples: 300,
      [
        { try timeBatch(1) { try mailbox.send(message) } },
        {
          try timeBatch(1) {
            let batch = try receiver.receiveAvailable(BenchMessage.self, limit: 1)
            try receiver.acknowledge(batch)
          }
        },
      ])
    let send = Measurement("scale.mailbox.send", samples[0])
    let receive = Measurement("scale.mailbox.receive", samples[1])
    return [
      Row(
        scenario: "mailbox: messages waiting, send one", size: backlog, median: send.median, p99: send.p99,
        note: "300 sends"),
      Row(
        scenario: "mailbox: messages waiting, receive + acknowledge one", size: backlog, median: receive.median,
        p99: receive.p99, note: "300 receives"),
    ]
  }

  /// The rows as a Markdown table, one block per scenario.
  static func table(_ rows: [Row]) -> String {
    func figure(_ value: Double) -> String {
      value >= 1_000_000
        ? String(format: "%.2f ms", value / 1e6)
        : value >= 1_000
          ? String(format: "%.1f µs", value / 1e3)
          : String(format: "%.0f ns", value)
    }
    var lines = ["| Scenario | Size | Median | p99 | Growth vs the smallest | Samples |", "|---|---|---|---|---|---|"]
    var first: [String: Double] = [:]
    for row in rows {
      let base = first[row.scenario] ?? row.median
      first[row.scenario] = base
      lines.append(
        "| \(row.scenario) | \(row.size) | \(figure(row.median)) | \(figure(row.p99)) | "
          + String(format: "%.2f×", row.median / base) + " | \(row.note) |")
    }
    return lines.joined(separator: "\n")
  }
}
