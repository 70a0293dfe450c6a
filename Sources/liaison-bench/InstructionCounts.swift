// Instructions per operation, counted by callgrind: a figure that does not move with the load of
// the machine, for the hot paths and their floors.
//
//   swift run -c release liaison-bench instructions [OPERATION…] [--json]
//
// Each operation runs in a child process of its own under `valgrind --tool=callgrind`, twice:
// once `short` times and once `long` times, after the same warm-up. Everything the two runs share
// (start-up, the container, the first statement's preparation) cancels out of the difference, so
// (instructions of the long run − instructions of the short run) / (long − short) is the cost of
// one operation, in user space, on every thread of the process (the event-loop thread's work for
// a write is the write's). System calls count as the few instructions that enter the kernel; the
// kernel's own work is not counted, which is why times stay beside these counts.

import Foundation
import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

enum InstructionCounts {
  /// An operation and how many times each of its two runs repeats it.
  struct Operation: Sendable {
    let name: String
    /// The floor it is compared with, if any.
    let floor: String?
    let short: Int
    let long: Int
    /// Prepares the operation in `directory` and returns one repetition of it.
    let prepare: @Sendable (_ directory: String) throws -> () throws -> Void
  }

  static let counter = DefaultsKey<Int>("counter")

  static let operations: [Operation] = [
    Operation(name: "lock.uncontended", floor: "floor.flock", short: 1_000, long: 11_000) { directory in
      let lock = try SharedContainer(directory: directory, createIfMissing: true).lock("count")
      return { try lock.lock().unlock() }
    },
    Operation(name: "floor.flock", floor: nil, short: 1_000, long: 11_000) { directory in
      let fd = open(directory + "/floor-flock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
      guard fd >= 0 else { throw BenchError("cannot open the floor's file") }
      return {
        flock(fd, LOCK_EX)
        flock(fd, LOCK_UN)
      }
    },
    Operation(name: "signal.post", floor: nil, short: 1_000, long: 11_000) { directory in
      let signal = try SharedContainer(directory: directory, createIfMissing: true).signal("count")
      var state: UInt64 = 0
      return {
        state += 1
        try signal.post(state: state)
      }
    },
    Operation(name: "signal.delivery", floor: nil, short: 1_000, long: 6_000) { directory in
      // A post here and its delivery to a handler on this process's event-loop thread: the post,
      // the loop's wake-up, its reading of inotify and of the record, and the handler.
      let signal = try SharedContainer(directory: directory, createIfMissing: true).signal("count")
      let delivered = DispatchSemaphore(value: 0)
      let observation = try signal.observeOnEventLoop { _ in delivered.signal() }
      var state: UInt64 = 0
      return {
        state += 1
        try signal.post(state: state)
        delivered.wait()
        withExtendedLifetime(observation) {}
      }
    },
    Operation(name: "defaults.get", floor: nil, short: 1_000, long: 11_000) { directory in
      let defaults = try SharedContainer(directory: directory, createIfMissing: true).defaults("count")
      try defaults.set(42, for: counter)
      return { _ = try defaults.get(counter) }
    },
    Operation(name: "defaults.set", floor: "floor.sqlite-upsert", short: 200, long: 1_200) { directory in
      let defaults = try SharedContainer(directory: directory, createIfMissing: true).defaults("count")
      var value = 0
      return {
        value += 1
        try defaults.set(value, for: counter)
      }
    },
    Operation(name: "floor.sqlite-upsert", floor: nil, short: 200, long: 1_200) { directory in
      let floor = try SQLiteUpsert(path: directory + "/floor.sqlite")
      var value = 0
      return {
        value += 1
        try floor.upsert(value)
      }
    },
    Operation(name: "mailbox.send", floor: "floor.sqlite-insert", short: 200, long: 1_200) { directory in
      let mailbox = try SharedContainer(directory: directory, createIfMissing: true).mailbox("count", sender: "bench")
      var value: UInt64 = 0
      return {
        value += 1
        try mailbox.send(value)
      }
    },
    Operation(name: "mailbox.send+receive+ack", floor: nil, short: 200, long: 1_200) { directory in
      // A send, then the receiver's look at the mailbox (one read of the store, one decode) and its
      // acknowledgement (a write), in one process: subtract `mailbox.send` for the receiver's part.
      let mailbox = try SharedContainer(directory: directory, createIfMissing: true).mailbox("count", sender: "bench")
      let receiver = try mailbox.receiver()
      var value: UInt64 = 0
      return {
        value += 1
        try mailbox.send(value)
        let envelopes = try receiver.receiveAvailable(UInt64.self, limit: 1)
        guard envelopes.count == 1 else { throw BenchError("the receiver found \(envelopes.count) messages") }
        try receiver.acknowledge(envelopes[0])
      }
    },
    Operation(name: "mailbox.batch", floor: "floor.sqlite-queue", short: 10, long: 60) { directory in
      // What `mailbox.throughput` does per batch, in one process: `sendAll` of 100 messages, the
      // receiver's look (100 rows, 100 JSON decodes) and one acknowledgement of them all.
      let mailbox = try SharedContainer(directory: directory, createIfMissing: true).mailbox("count", sender: "bench")
      let receiver = try mailbox.receiver()
      let batch = (0..<PlaceScenarios.batchSize).map { BenchMessage(n: $0, text: "message \($0)") }
      return {
        try mailbox.sendAll(batch)
        let envelopes = try receiver.receiveAvailable(BenchMessage.self, limit: batch.count)
        guard envelopes.count == batch.count else { throw BenchError("the receiver found \(envelopes.count) messages") }
        try receiver.acknowledge(envelopes)
      }
    },
    Operation(name: "floor.sqlite-queue", floor: nil, short: 10, long: 60) { directory in
      // The floor of `mailbox.throughput`, per batch: the same work on one connection (SQLiteQueue).
      let floor = try SQLiteQueue(path: directory + "/floor-queue.sqlite")
      let batch = (0..<PlaceScenarios.batchSize).map { BenchMessage(n: $0, text: "message \($0)") }
      return { try floor.passBatch(batch) }
    },
    Operation(name: "floor.sqlite-insert", floor: nil, short: 200, long: 1_200) { directory in
      let floor = try SQLiteQueue(path: directory + "/floor-insert.sqlite")
      var value: UInt64 = 0
      return {
        value += 1
        try floor.insert(value)
      }
    },
  ]

  static let usage = "usage: liaison-bench instructions [OPERATION…] [--json]"

  /// Counts every wanted operation (all by default) and prints them with their floors.
  static func main(_ arguments: [String]) -> Int32 {
    let json = arguments.contains("--json")
    let wanted = arguments.filter { $0 != "--json" }
    for name in wanted where !operations.contains(where: { $0.name == name }) {
      let known = operations.map(\.name).joined(separator: ", ")
      FileHandle.standardError.write(Data("liaison-bench: unknown operation '\(name)'; known: \(known)\n".utf8))
      return 64
    }
    var counts: [String: Double] = [:]
    do {
      for operation in operations where wanted.isEmpty || wanted.contains(operation.name) {
        counts[operation.name] = try perOperation(operation)
      }
    } catch {
      FileHandle.standardError.write(Data("liaison-bench instructions: \(error)\n".utf8))
      return 1
    }
    let rows = operations.compactMap { operation -> Row? in
      guard let count = counts[operation.name] else { return nil }
      let floor = operation.floor.flatMap { name in counts[name].map { (name, $0) } }
      return Row(
        name: operation.name, instructions: count.rounded(), floor: floor?.0, floorInstructions: floor?.1.rounded(),
        ratio: floor.map { count / $0.1 })
    }
    if json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      print(String(decoding: (try? encoder.encode(["instructions": rows])) ?? Data(), as: UTF8.self))
    } else {
      for row in rows {
        var line =
          row.name.padding(toLength: 24, withPad: " ", startingAt: 0)
          + String(format: "%10.0f instructions", row.instructions)
        if let floor = row.floor, let floorCount = row.floorInstructions, let ratio = row.ratio {
          line += String(format: "   %@ %.0f   %.2f×", floor, floorCount, ratio)
        }
        print(line)
      }
    }
    return 0
  }

  struct Row: Encodable {
    let name: String
    let instructions: Double
    let floor: String?
    let floorInstructions: Double?
    let ratio: Double?
  }

  /// Runs the operation's two counted children and returns the instructions of one repetition.
  static func perOperation(_ operation: Operation) throws -> Double {
    let short = try instructions(of: operation.name, repetitions: operation.short)
    let long = try instructions(of: operation.name, repetitions: operation.long)
    return Double(long - short) / Double(operation.long - operation.short)
  }

  /// The instructions callgrind counted in a child that repeats the operation `repetitions` times.
  static func instructions(of name: String, repetitions: Int) throws -> Int {
    let output = NSTemporaryDirectory() + "liaison-callgrind-\(getpid())-\(name)-\(repetitions).out"
    let messages = output + ".log"
    defer {
      unlink(output)
      unlink(messages)
    }
    let valgrind = Process()
    valgrind.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    valgrind.arguments = [
      "valgrind", "--tool=callgrind", "--callgrind-out-file=" + output, "--log-file=" + messages,
      Bundle.main.executablePath ?? CommandLine.arguments[0], "--count", name, String(repetitions),
    ]
    try valgrind.run()
    valgrind.waitUntilExit()
    guard valgrind.terminationStatus == 0 else {
      FileHandle.standardError.write((try? Data(contentsOf: URL(fileURLWithPath: messages))) ?? Data())
      throw BenchError(
        "valgrind on \(name) ended with status \(valgrind.terminationStatus) (is valgrind installed? apt-get install valgrind)"
      )
    }
    let text = try String(contentsOfFile: output, encoding: .utf8)
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("summary:") || $0.hasPrefix("totals:") }),
      let count = Int(line.split(separator: " ").last ?? "")
    else { throw BenchError("no instruction total in callgrind's output for \(name)") }
    return count
  }

  /// The counted child: warms the operation up, then repeats it `repetitions` times.
  static func child(_ arguments: [String]) throws -> Never {
    guard arguments.count == 2, let operation = operations.first(where: { $0.name == arguments[0] }),
      let repetitions = Int(arguments[1])
    else { throw BenchError("usage: liaison-bench --count OPERATION REPETITIONS") }
    let directory = NSTemporaryDirectory() + "liaison-count-\(getpid())"
    guard mkdir(directory, 0o700) == 0 else { throw BenchError("cannot make \(directory): errno \(errno)") }
    let body = try operation.prepare(directory)
    for _ in 0..<100 { try body() }
    for _ in 0..<repetitions { try body() }
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
  }
}
