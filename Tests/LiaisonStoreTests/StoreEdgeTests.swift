import Foundation
import GRDB
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

/// The edges of the store and of shared databases: errors that keep SQLite's code, names of the
/// longest length, listings that wait instead of failing, a write-ahead log that shrinks back.
@Suite("Store and database edges")
struct StoreEdgeTests {
  let directory = TemporaryDirectory()

  static let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE item (value BLOB)") }
    return migrator
  }()

  @Test func aDamagedStoreKeepsSQLitesCodeInTheError() throws {
    let folder = directory.path + "/.liaison/store"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: folder + "/defaults.sqlite"))
    let container = try SharedContainer(directory: directory.path)
    let error = #expect(throws: LiaisonError.self) { _ = try container.defaults("settings") }
    #expect(error?.code == .corruptFile)
    #expect(error?.databaseError?.resultCode == .SQLITE_NOTADB)
  }

  @Test func anInterruptionBySuspensionIsSuspendedAndKeepsGRDBsError() {
    let interrupted = StoreDatabase.translate(DatabaseError(resultCode: .SQLITE_INTERRUPT), path: "/x")
    #expect(interrupted.code == .suspended)
    #expect(interrupted.databaseError?.isInterruptionError == true)
    let suspended = StoreDatabase.translate(
      DatabaseError(resultCode: .SQLITE_ABORT, message: "Database is suspended"), path: "/x")
    #expect(suspended.code == .suspended)
    #expect(suspended.databaseError?.resultCode == .SQLITE_ABORT)
  }

  @Test(arguments: [122, 128]) func aDatabaseNameOfTheLongestLengthsOpensAndIsListed(_ length: Int) throws {
    let name = String(repeating: "d", count: length)
    let container = try SharedContainer(directory: directory.path)
    let database = try container.database(name, migrator: Self.migrator)
    try database.pool.write { db in try db.execute(sql: "INSERT INTO item VALUES (1)") }
    let listed = try container.sharedDatabases()
    #expect(listed.map(\.name.rawValue) == [name])
    #expect(listed.first?.migrations == ["v1"])
  }

  /// `liaison status` lists a database while another connection keeps readers out (here the
  /// peer holds it in SQLite's exclusive locking mode): the listing waits, read-only, instead of
  /// failing with `SQLITE_BUSY`.
  @Test func theListingWaitsForADatabaseThatKeepsReadersOut() throws {
    let container = try SharedContainer(directory: directory.path)
    do { _ = try container.database("journal", migrator: Self.migrator) }
    let peer = try Peer(container: directory.path)
    try peer.send(.dbexclusive, "journal")
    let busyBefore = SharedDatabase.listingBusyWaits.value
    let listing = Locked<Result<[SharedDatabaseInfo], LiaisonError>?>(nil)
    let thread = Thread {
      let result = Result { () throws(LiaisonError) in try container.sharedDatabases() }
      listing.withLock { $0 = result }
    }
    thread.start()
    try waitUntil("the listing waits for the lock, or ends") {
      SharedDatabase.listingBusyWaits.value > busyBefore || listing.withLock { $0 } != nil
    }
    try peer.send(.dbrelease, "journal")
    try waitUntil("the listing ends") { listing.withLock { $0 } != nil }
    let infos = try #require(listing.withLock { $0 }).get()
    #expect(infos.map(\.migrations) == [["v1"]])
  }

  /// A large transaction grows the write-ahead log; once its pages are checkpointed, the next
  /// writes start the log again and cut it back to the limit.
  @Test func theWriteAheadLogShrinksBackAfterALargeTransaction() throws {
    let container = try SharedContainer(directory: directory.path)
    let database = try container.database("journal", migrator: Self.migrator)
    let log = database.path + "-wal"
    try database.pool.write { db in
      for _ in 0..<12 { try db.execute(sql: "INSERT INTO item VALUES (zeroblob(1048576))") }
    }
    #expect(try logSize(log) > 12 << 20)
    for _ in 0..<3 {
      _ = try database.pool.writeWithoutTransaction { db in try db.checkpoint(.passive) }
      try database.pool.write { db in try db.execute(sql: "INSERT INTO item VALUES (1)") }
    }
    #expect(try logSize(log) <= SharedPool.walSizeLimit)
  }

  private func logSize(_ path: String) throws -> Int {
    (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
  }
}
