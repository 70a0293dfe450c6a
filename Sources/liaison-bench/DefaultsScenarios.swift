import Foundation
import GRDBSQLite
import Liaison
import LiaisonStore

enum DefaultsScenarios {
  static let counter = DefaultsKey<Int>("counter")
  static let other = DefaultsKey<Int>("other")

  /// `defaults.get`: a cached read while another process writes the same domain now and then
  /// (every 5 ms), against `foundation.userdefaults.get`. The folder's synchronous `get`: its
  /// `async` form through a task measured 1.56× it (PlaceScenarios.swift).
  static func get(_ container: SharedContainer) throws -> ScenarioResult {
    let defaults = try container.defaults("bench-get")
    try defaults.set(42, for: counter)
    let writer = try BenchPeer("defaults-writer", [container.directory, "bench-get"])
    defer { withExtendedLifetime(writer) {} }
    let suite = UserDefaults(suiteName: "liaison-bench-\(getpid())")!
    suite.set(42, forKey: "counter")
    defer { suite.removePersistentDomain(forName: "liaison-bench-\(getpid())") }
    let batch = 1000
    let samples = try interleave(
      samples: 200,
      [
        { try timeBatch(batch) { _ = try defaults.get(counter) } },
        { timeBatch(batch) { _ = suite.integer(forKey: "counter") } },
      ])
    return ScenarioResult(
      measurement: Measurement("defaults.get", samples[0]), unit: "ns",
      baselines: [Measurement("foundation.userdefaults.get", samples[1])],
      target: "< 200 ns and ≤ 0.1× foundation.userdefaults.get")
  }

  /// `defaults.set`: visible to every process on return, against `floor.sqlite-upsert` (a
  /// prepared upsert in one WAL transaction, same pragmas, through the SQLite C API) and
  /// `foundation.userdefaults.set-synchronize`.
  static func set(_ container: SharedContainer) throws -> ScenarioResult {
    let defaults = try container.defaults("bench-set")
    let floor = try SQLiteUpsert(path: container.directory + "/floor.sqlite")
    let suite = UserDefaults(suiteName: "liaison-bench-set-\(getpid())")!
    defer { suite.removePersistentDomain(forName: "liaison-bench-set-\(getpid())") }
    let value = Locked(0)  // each set's value, and the floor's
    let next: @Sendable () -> Int = {
      value.withLock {
        $0 += 1
        return $0
      }
    }
    let batch = 20
    let samples = try interleave(
      samples: 150,
      [
        PlaceScenarios.defaultsSet(defaults, counter, batch: batch, value: next),
        { try timeBatch(batch) { try floor.upsert(value.withLock { $0 }) } },
        {
          timeBatch(batch) {
            suite.set(value.withLock { $0 }, forKey: "counter")
            suite.synchronize()
          }
        },
      ])
    return ScenarioResult(
      measurement: Measurement("defaults.set", samples[0]), unit: "ns",
      baselines: [
        Measurement("floor.sqlite-upsert", samples[1]),
        Measurement("foundation.userdefaults.set-synchronize", samples[2]),
      ],
      target: "≤ 2× floor.sqlite-upsert")
  }

  /// `defaults.visibility`: a `set` here → the value's change sequence yields it in another
  /// process, one way, against `floor.pipe-to-async` and `floor.pipe-half-rtt`. The value is the time of the set.
  static func visibility(_ container: SharedContainer) throws -> ScenarioResult {
    let defaults = try container.defaults("bench-visibility")
    try defaults.set(0, for: counter)
    let observer = try BenchPeer("defaults-observer", [container.directory, "bench-visibility"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let pipeToAsync = try Floor.pipeToAsync()
    let samples = try interleave(
      samples: 500,
      [
        PlaceScenarios.defaultsVisibility(defaults, counter, observer),
        pipeToAsync,
        pipe,
      ])
    return ScenarioResult(
      measurement: Measurement("defaults.visibility", samples[0]), unit: "ns",
      baselines: [Measurement("floor.pipe-to-async", samples[1]), Measurement("floor.pipe-half-rtt", samples[2])],
      target: "p50 ≤ 200 µs")
  }

  /// The writer peer: sets `other` in the domain every 5 ms until its input closes.
  static func write(container: String, domain: String, input: CInt, output: CInt) throws -> Never {
    let defaults = try SharedContainer(directory: container, createIfMissing: true).defaults(domain)
    Thread.detachNewThread {
      var value = 0
      while true {
        value += 1
        try? defaults.set(value, for: other)
        usleep(5_000)
      }
    }
    serveUntilInputCloses(input: input, output: output)
  }

  /// The observer peer (`PlaceScenarios.observe`) of `counter` in the folder `container`.
  static func observe(container: String, domain: String, input: CInt, output: CInt) throws -> Never {
    let place = try SharedContainer(directory: container, createIfMissing: true)
    try PlaceScenarios.observe(
      try place.defaults(domain), counter, input: input, output: output, keeping: place)
  }
}

/// The floor of a write: one prepared upsert in its own `BEGIN IMMEDIATE` transaction, on a
/// WAL database with `synchronous = NORMAL`, through the SQLite C API.
final class SQLiteUpsert {
  private var db: OpaquePointer?
  private var statement: OpaquePointer?

  init(path: String) throws {
    db = try openFloorDatabase(
      path, table: "entry (domain TEXT, key TEXT, value BLOB, PRIMARY KEY (domain, key)) WITHOUT ROWID")
    let upsert = """
      INSERT INTO entry (domain, key, value) VALUES ('bench', 'counter', ?)
      ON CONFLICT (domain, key) DO UPDATE SET value = excluded.value
      """
    guard sqlite3_prepare_v2(db, upsert, -1, &statement, nil) == SQLITE_OK else {
      throw BenchError("cannot prepare the upsert")
    }
  }

  deinit {
    sqlite3_finalize(statement)
    sqlite3_close(db)
  }

  func upsert(_ value: Int) throws {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
    let text = Array(String(value).utf8)
    sqlite3_bind_blob(statement, 1, text, Int32(text.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("upsert failed") }
    sqlite3_reset(statement)
    guard sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw BenchError("commit failed") }
  }
}

/// Opens a floor's database as the store's are set up (WAL, `synchronous = NORMAL`), with `table`
/// (a name and its columns) created if missing.
func openFloorDatabase(_ path: String, table: String) throws -> OpaquePointer? {
  var db: OpaquePointer?
  guard sqlite3_open(path, &db) == SQLITE_OK else { throw BenchError("cannot open \(path)") }
  for sql in ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "CREATE TABLE IF NOT EXISTS " + table] {
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw BenchError("cannot run \(sql)") }
  }
  return db
}

struct BenchError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
