import Foundation
import GRDBSQLite
import Liaison
import LiaisonStore

enum MailboxScenarios {
  /// `mailbox.latency`: a send here → the receiver's `AsyncSequence` yields the message in
  /// another process, one way, against `floor.pipe-to-async` and `floor.pipe-half-rtt`. The payload is the time of the
  /// send; the receiver answers with how long ago that was, then acknowledges the message and
  /// says so (outside the measured time), so that no acknowledgement overlaps the next send.
  static func latency(_ container: SharedContainer) throws -> ScenarioResult {
    let mailbox = try container.mailbox("bench-latency", sender: "bench")
    let receiver = try BenchPeer("mailbox-receiver", [container.directory, "bench-latency", "latency"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let pipeToAsync = try Floor.pipeToAsync()
    let samples = try interleave(
      samples: 1000,
      [
        PlaceScenarios.mailboxLatency(mailbox, receiver),
        pipeToAsync,
        pipe,
      ])
    return ScenarioResult(
      measurement: Measurement("mailbox.latency", samples[0]), unit: "ns",
      baselines: [Measurement("floor.pipe-to-async", samples[1]), Measurement("floor.pipe-half-rtt", samples[2])],
      target: "p50 ≤ 100 µs where floor.pipe-to-async ≤ 25 µs")
  }

  static let messagesPerSample = 10_000

  /// `mailbox.throughput`: messages per second from this process to a receiver in another, in
  /// batches of 100 (`sendAll`; `receive(limit: 100)` + one `acknowledge` per batch), from the
  /// first send to the receiver's acknowledgement of the last message; against
  /// `floor.sqlite-queue`, the same batches inserted, read and deleted through the SQLite C API in
  /// one process (no second process, no wake-ups).
  static func throughput(_ container: SharedContainer) throws -> ScenarioResult {
    let mailbox = try container.mailbox("bench-throughput", sender: "bench")
    let receiver = try BenchPeer(
      "mailbox-receiver", [container.directory, "bench-throughput", "throughput", String(messagesPerSample)])
    let floor = try SQLiteQueue(path: container.directory + "/floor-queue.sqlite")
    let batch = (0..<PlaceScenarios.batchSize).map { BenchMessage(n: $0, text: "message \($0)") }
    let samples = try interleave(
      samples: 9,
      [
        PlaceScenarios.mailboxThroughput(
          mailbox, receiver, batch: batch, batches: messagesPerSample / PlaceScenarios.batchSize),
        {
          let start = now()
          for _ in 0..<(messagesPerSample / PlaceScenarios.batchSize) { try floor.passBatch(batch) }
          return Double(messagesPerSample) / (Double(now() - start) / 1e9)
        },
      ])
    return ScenarioResult(
      measurement: Measurement("mailbox.throughput", samples[0]), unit: "msgs/s",
      baselines: [Measurement("floor.sqlite-queue", samples[1])], target: "≥ 50,000 msgs/s")
  }

  /// The receiver peer (`PlaceScenarios.receive`) on the folder `container`.
  static func receive(container: String, name: String, mode: [String], input: CInt, output: CInt) throws -> Never {
    let place = try SharedContainer(directory: container, createIfMissing: true)
    PlaceScenarios.receive(
      try place.mailbox(name).receiver(), mode: mode, input: input, output: output, keeping: place)
  }
}

/// The throughput scenario's message: a number and a short text, as an app would send.
struct BenchMessage: Codable, Sendable {
  let n: Int
  let text: String
}

/// The floor of a queue: batches inserted in one `BEGIN IMMEDIATE` transaction, then read in
/// order and deleted in another, on a WAL database with `synchronous = NORMAL`, through the
/// SQLite C API, in one process.
final class SQLiteQueue {
  static let table = "queue (position INTEGER PRIMARY KEY AUTOINCREMENT, payload BLOB NOT NULL)"
  private var db: OpaquePointer?
  private var insert: OpaquePointer?
  private var select: OpaquePointer?
  private var delete: OpaquePointer?

  init(path: String) throws {
    db = try openFloorDatabase(path, table: Self.table)
    for (sql, statement) in [
      ("INSERT INTO queue (payload) VALUES (?)", \SQLiteQueue.insert),
      ("SELECT position, payload FROM queue ORDER BY position LIMIT ?", \SQLiteQueue.select),
      ("DELETE FROM queue WHERE position <= ?", \SQLiteQueue.delete),
    ] {
      var prepared: OpaquePointer?
      guard sqlite3_prepare_v2(db, sql, -1, &prepared, nil) == SQLITE_OK else { throw BenchError("cannot prepare") }
      self[keyPath: statement] = prepared
    }
  }

  deinit {
    for statement in [insert, select, delete] { sqlite3_finalize(statement) }
    sqlite3_close(db)
  }

  /// The floor of one send: an 8-byte payload inserted in its own `BEGIN IMMEDIATE` transaction
  /// (`liaison-bench instructions`' `floor.sqlite-insert`).
  func insert(_ value: UInt64) throws {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
    var payload = value.littleEndian
    sqlite3_bind_blob(insert, 1, &payload, 8, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    guard sqlite3_step(insert) == SQLITE_DONE else { throw BenchError("insert failed") }
    sqlite3_reset(insert)
    guard sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw BenchError("commit failed") }
  }

  /// Inserts the batch (JSON-encoded, as the mailbox stores it), then reads it back and deletes it.
  func passBatch(_ messages: [BenchMessage]) throws {
    let encoder = JSONEncoder()
    sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
    for message in messages {
      let bytes = [UInt8](try encoder.encode(message))
      sqlite3_bind_blob(insert, 1, bytes, Int32(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
      guard sqlite3_step(insert) == SQLITE_DONE else { throw BenchError("insert failed") }
      sqlite3_reset(insert)
    }
    guard sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw BenchError("commit failed") }
    let decoder = JSONDecoder()
    sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
    sqlite3_bind_int(select, 1, Int32(messages.count))
    var last: Int64 = 0
    while sqlite3_step(select) == SQLITE_ROW {
      last = sqlite3_column_int64(select, 0)
      let bytes = Data(bytes: sqlite3_column_blob(select, 1), count: Int(sqlite3_column_bytes(select, 1)))
      _ = try decoder.decode(BenchMessage.self, from: bytes)
    }
    sqlite3_reset(select)
    sqlite3_bind_int64(delete, 1, last)
    guard sqlite3_step(delete) == SQLITE_DONE else { throw BenchError("delete failed") }
    sqlite3_reset(delete)
    guard sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw BenchError("commit failed") }
  }
}
