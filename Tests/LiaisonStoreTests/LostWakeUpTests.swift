import Dispatch
import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

/// A writer killed (a real `SIGKILL`) after its commit and before it rang the signal: the other
/// processes' observers are told all the same, without polling: on Linux when its descriptors
/// close, on Apple platforms by its lock's release or its write of the log (CI runs this suite
/// in the kqueue model too, `KqueueModel`).
@Suite("Lost wake-ups in the store")
struct LostWakeUpTests {
  let directory = TemporaryDirectory()

  /// Has `writer` run `command`, which commits, and die (`SIGKILL`) before it rings.
  private func dieBeforeRing(_ writer: Peer, _ command: PeerCommand, _ arguments: String...) throws {
    try writer.send(.dieBeforeRing)
    writer.child.write(command.line(arguments))
    writer.child.wait()
  }

  @Test func aDefaultsWriterKilledBetweenCommitAndRingStillWakesChangesOfKey() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    try reader.send(.dwatch, "settings", "volume")
    #expect(try reader.send(.dnext) == "nil")
    try writer.send(.dset, "settings", "volume", "3")
    #expect(try reader.send(.dnext) == "3")

    try dieBeforeRing(writer, .dset, "settings", "volume", "5")
    #expect(try reader.send(.dget, "settings", "volume") == "5")  // committed
    #expect(try reader.send(.dnext, "10000") == "5")
  }

  @Test func aDatabaseWriterKilledBetweenCommitAndRingStillRefreshesObservations() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    try reader.send(.dbopen, "notes", "1")
    try writer.send(.dbopen, "notes", "1")
    try reader.send(.dbwatch, "notes")
    #expect(try reader.send(.dbnext) == "0")
    try writer.send(.dbinsert, "notes", "1")
    #expect(try reader.send(.dbnext) == "1")

    try dieBeforeRing(writer, .dbinsert, "notes", "1")
    #expect(try reader.send(.dbnext, "10000") == "2")
    #expect(try reader.send(.dbcount, "notes") == "2")  // committed
  }

  @Test func changesOfAKeyThrowsWhenTheValueCannotBeRead() async throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try await container.defaults("settings")
    try await defaults.set(42, for: DefaultsKey<Int>("volume"))
    var values = try await defaults.changes(of: DefaultsKey<String>("volume")).makeAsyncIterator()
    await #expect(throws: LiaisonError.self) {
      let value = try await values.next()
      Issue.record("the sequence gave \(String(describing: value)) instead of throwing")
    }
  }
}

@Suite("The database relay")
struct DatabaseRelayTests {
  let directory = TemporaryDirectory()

  /// The relay fails while the database file is not where it was opened (every commit there is
  /// refused, the relay's too), and must deliver once the file is back, however often it failed.
  @Test func aRelayThatFailsTwiceStillRefreshesTheObservation() throws {
    let container = try SharedContainer(directory: directory.path)
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    }
    let database = try container.database("notes", migrator: migrator)
    let counts = Locked<[Int]>([])
    let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 }
      .removeDuplicates()
      .start(
        in: database.pool, scheduling: .async(onQueue: DispatchQueue(label: "counts")), onError: { _ in },
        onChange: { count in counts.withLock { $0.append(count) } })
    defer { observation.cancel() }
    try waitUntil("the observation has its first value") { counts.withLock { $0 } == [0] }
    let writer = try Peer(container: directory.path)
    try writer.send(.dbopen, "notes", "1")

    // Hold this process's writer, so that the relay of the next commit runs only after the move.
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      database.pool.writeWithoutTransaction { _ in
        entered.signal()
        release.wait()
      }
    }
    entered.wait()
    let failuresBefore = SharedDatabase.relayFailures.value
    try writer.send(.dbinsert, "notes", "1")
    #expect(rename(database.path, database.path + ".aside") == 0)
    release.signal()
    try waitUntil("the relay failed twice", timeout: 20) {
      SharedDatabase.relayFailures.value >= failuresBefore + 2
    }
    #expect(rename(database.path + ".aside", database.path) == 0)
    try waitUntil("the observation sees the row", timeout: 20) { counts.withLock { $0 } == [0, 1] }
  }
}
