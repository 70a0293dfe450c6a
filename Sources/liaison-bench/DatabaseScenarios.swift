import Foundation
import GRDB
import Liaison
import LiaisonStore

enum DatabaseScenarios {
  static let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(sql: "CREATE TABLE sample (id INTEGER PRIMARY KEY, postedAt INTEGER NOT NULL)")
    }
    return migrator
  }()

  /// `database.observation`: a commit here → a `ValueObservation` in another process delivers
  /// the new value, one way, against `floor.pipe-to-async` and `floor.pipe-half-rtt`. The committed row holds the time of
  /// the commit, and the observer answers with how long ago that was.
  static func observation(_ container: SharedContainer) throws -> ScenarioResult {
    let database = try container.database("bench-observation", migrator: migrator)
    let observer = try BenchPeer("database-observer", [container.directory, "bench-observation"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let pipeToAsync = try Floor.pipeToAsync()
    let samples = try interleave(
      samples: 300,
      [
        {
          try database.pool.write { db in
            try db.execute(sql: "INSERT INTO sample (postedAt) VALUES (?)", arguments: [Int64(bitPattern: now())])
          }
          return Double(observer.readTimestamp())
        },
        pipeToAsync,
        pipe,
      ])
    return ScenarioResult(
      measurement: Measurement("database.observation", samples[0]), unit: "ns",
      baselines: [Measurement("floor.pipe-to-async", samples[1]), Measurement("floor.pipe-half-rtt", samples[2])],
      target: "p50 ≤ 1 ms")
  }

  /// The observer peer: observes the newest row and answers each with the time since its commit.
  static func observe(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let database = try SharedContainer(directory: container, createIfMissing: true).database(name, migrator: migrator)
    let newest = ValueObservation.tracking { db in
      try Int64.fetchOne(db, sql: "SELECT postedAt FROM sample ORDER BY id DESC LIMIT 1")
    }.removeDuplicates()
    let cancellable = newest.start(
      in: database.pool, scheduling: .async(onQueue: DispatchQueue(label: "observer")), onError: { _ in },
      onChange: { postedAt in
        if let postedAt { writeBytes(output, encodeTimestamp(now() &- UInt64(bitPattern: postedAt))) }
      })
    withExtendedLifetime(cancellable) { serveUntilInputCloses(input: input, output: output) }
  }
}
