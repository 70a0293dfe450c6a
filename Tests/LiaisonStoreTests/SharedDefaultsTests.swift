import Foundation
import GRDB
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

@Suite("SharedDefaults across processes")
struct SharedDefaultsTests {
  let directory = TemporaryDirectory()

  @Test func eightProcessesIncrementingOneKeyCountExactly() throws {
    let peers = try (0..<8).map { _ in try Peer(container: directory.path) }
    for peer in peers { peer.start(.dincrement, "counters", "launches", "500") }
    for peer in peers {
      #expect(try peer.child.readLine(timeout: 600) == "ok done")
      // The process lock serialised every write: SQLite never had to wait for another writer.
      #expect(try peer.send(.dbusy) == "0")
    }
    let defaults = try SharedContainer(directory: directory.path).defaults("counters")
    #expect(try defaults.get(DefaultsKey<Int>("launches")) == 4000)
  }

  @Test func aSetInOneProcessIsSeenByTheNextGetInAnotherAndByItsChanges() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    #expect(try reader.send(.dget, "settings", "volume") == "nil")  // fills the reader's cache
    try reader.send(.dwatch, "settings", "volume")
    #expect(try reader.send(.dnext) == "nil")
    for value in 1...20 {
      try writer.send(.dset, "settings", "volume", value)  // returned: the reader must see it now
      #expect(try reader.send(.dget, "settings", "volume") == "\(value)")
    }
    // Coalesced: at least one change, ending on the last value, in order, with no repeats.
    var seen: [String] = []
    repeat {
      seen.append(try reader.send(.dnext))
    } while seen.last != "20" && seen.last != "none"
    #expect(seen.last == "20")
    #expect(seen.compactMap { Int($0) } == seen.compactMap { Int($0) }.sorted())
    #expect(Set(seen).count == seen.count)
  }

  @Test func writersAndReadersInSixProcessesNeverSeeBusy() throws {
    let writers = try (0..<4).map { _ in try Peer(container: directory.path) }
    let readers = try (0..<2).map { _ in try Peer(container: directory.path) }
    for writer in writers { writer.start(.dincrement, "busy", "count", "300") }
    for reader in readers { reader.start(.dread, "busy", "count", "3000") }
    for peer in writers + readers {
      #expect(try peer.child.readLine(timeout: 600) == "ok done")
      #expect(try peer.send(.dbusy) == "0")
    }
    #expect(try SharedContainer(directory: directory.path).defaults("busy").get(DefaultsKey<Int>("count")) == 1200)
  }

  @Test func eightProcessesRefreshingAStaleTokenRefreshItOnce() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("auth")
    try defaults.set("stale", for: DefaultsKey<String>("token"))
    let countFile = directory.path + "/refreshes"
    let peers = try (0..<8).map { _ in try Peer(container: directory.path) }
    for peer in peers { peer.start(.drefresh, "auth", "token", countFile) }
    var tokens: Set<String> = []
    for peer in peers {
      let answer = try peer.child.readLine(timeout: 120)
      #expect(answer.hasPrefix("ok fresh-from-"))
      tokens.insert(answer)
    }
    #expect(tokens.count == 1)
    let refreshes = try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n")
    #expect(refreshes.count == 1)
  }

  /// A stale token and a peer whose refresh of it has started and never finishes; returns the
  /// peer and the file that counts refreshes.
  private func startHungRefresh() throws -> (refresher: Peer, countFile: String) {
    let defaults = try SharedContainer(directory: directory.path).defaults("auth")
    try defaults.set("stale", for: DefaultsKey<String>("token"))
    let countFile = directory.path + "/refreshes"
    let refresher = try Peer(container: directory.path)
    refresher.start(.drefresh, "auth", "token", countFile, "hang")
    try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
    return (refresher, countFile)
  }

  @Test(.enabled(if: readsProc, "reads /proc (Linux)"))
  func aRefresherKilledMidRefreshIsTakenOverAtOnceByAWaitingProcess() throws {
    let (doomed, countFile) = try startHungRefresh()
    let waiter = try Peer(container: directory.path)
    waiter.start(.drefresh, "auth", "token", countFile)
    try waitUntil("the second process waits for the refresh lock") { try KernelLocks.hasBlockedWaiter(pid: waiter.pid) }
    doomed.kill()
    let answer = try waiter.child.readLine(timeout: 2)  // at once, not after a staleness timeout
    #expect(answer == "ok fresh-from-\(waiter.pid)")
    #expect(try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n").count == 2)
  }

  @Test func aWriteInsideATransactionIsRefusedInsteadOfDeadlocking() throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("nested")
    let other = try container.defaults("other")
    let key = DefaultsKey<Int>("k")
    for attempt: (SharedDefaults) throws -> Void in [
      { try $0.set(1, for: key) }, { _ = try $0.update(key) { _ in 2 } }, { try $0.transaction { _ in } },
    ] {
      for target in [defaults, other] {
        #expect {
          try defaults.transaction { _ in try attempt(target) }
        } throws: { ($0 as? LiaisonError)?.code == .invalidArgument }
      }
    }
    try defaults.set(3, for: key)  // and the store is still usable
    #expect(try defaults.get(key) == 3)
  }

  @Test func aWriterThatDiedBetweenCommitAndCounterIsStillSeen() throws {
    let reader = try Peer(container: directory.path)
    try reader.send(.dset, "seq", "value", "1")
    #expect(try reader.send(.dget, "seq", "value") == "1")  // cached now
    // Stage a writer that committed and died before making the counter even again: the slot is
    // left odd, and the value changed behind the cache.
    let store = directory.path + "/.liaison/store/"
    let slot = GenerationCounters.slot(for: "seq")
    let counters = try FileHandle(forUpdating: URL(fileURLWithPath: store + "defaults.generations"))
    try counters.seek(toOffset: UInt64(slot * 8))
    var word = try counters.read(upToCount: 8)!.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    word |= 1
    try counters.seek(toOffset: UInt64(slot * 8))
    try counters.write(contentsOf: withUnsafeBytes(of: word) { Data($0) })
    try counters.close()
    let queue = try DatabaseQueue(path: store + "defaults.sqlite")
    try queue.write { db in
      try db.execute(sql: "UPDATE defaults_entry SET value = '2' WHERE domain = 'seq' AND key = 'value'")
    }
    #expect(try reader.send(.dget, "seq", "value") == "2")
    try reader.send(.dset, "seq", "value", "3")  // the next writer repairs the counter
    #expect(try reader.send(.dget, "seq", "value") == "3")
  }

  @Test func rowsWrittenByAnotherProgramAreCorruptErrorsNotCrashes() throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("foreign")
    try defaults.set(1, for: DefaultsKey<Int>("good"))
    let queue = try DatabaseQueue(path: directory.path + "/.liaison/store/defaults.sqlite")
    try queue.write { db in
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('foreign', 'kind', 'x', X'00')")
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('foreign', 'number', 0, 5)")
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('bad domain!', 'k', 0, '1')")
    }
    for key in ["kind", "number"] {
      #expect {
        _ = try defaults.get(DefaultsKey<Int>(validating: key))
      } throws: { ($0 as? LiaisonError)?.code == .corruptFile }
    }
    #expect { _ = try defaults.snapshot() } throws: { ($0 as? LiaisonError)?.code == .corruptFile }
    #expect(try container.defaultsDomains().map(\.domain.rawValue) == ["foreign"])
    let cli = try Peer(container: directory.path)
    #expect(try cli.ask(.dget, "foreign", "number").hasPrefix("error corrupt file"))
  }

  @Test func aWaiterGivesUpAtItsTimeoutWhileAnotherProcessRefreshes() throws {
    let (stuck, countFile) = try startHungRefresh()
    defer { withExtendedLifetime(stuck) {} }
    let waiter = try Peer(container: directory.path)
    let started = Date()
    let answer = try waiter.ask(.drefresh, "auth", "token", countFile, "timeout=300")
    let waited = Date().timeIntervalSince(started)
    #expect(answer.hasPrefix("error timed out"), "\(answer)")
    #expect(waited >= 0.3, "gave up \(waited) s after it started, before its timeout (0.3 s)")
  }

  @Test func aStoreMigratedByANewerVersionIsRefusedAndLeftAsItIs() throws {
    let maker = try Peer(container: directory.path)
    try maker.send(.dset, "app", "launches", "7")
    maker.kill()
    let file = directory.path + "/.liaison/store/defaults.sqlite"
    let queue = try DatabaseQueue(path: file)
    try queue.write { db in try db.execute(sql: "INSERT INTO grdb_migrations VALUES ('defaults v99')") }
    let reader = try Peer(container: directory.path)
    let answer = try reader.ask(.dget, "app", "launches")
    #expect(answer.hasPrefix("error incompatible schema"), "\(answer)")
    let rows = try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM defaults_entry") }
    let migrations = try queue.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
    #expect(rows == 1)
    #expect(migrations == ["defaults v1", "defaults v99"])
  }

  @Test func transactionsAreAtomicAndRollBackOnError() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("tx")
    let a = DefaultsKey<Int>("a")
    let b = DefaultsKey<Int>("b")
    try defaults.transaction { tx in
      try tx.set(1, for: a)
      try tx.set(2, for: b)
    }
    struct Refused: Error {}
    #expect(throws: Refused.self) {
      try defaults.transaction { tx in
        try tx.set(10, for: a)
        throw Refused()
      }
    }
    #expect(try defaults.get(a) == 1)
    #expect(try defaults.get(b) == 2)
    #expect(try defaults.keys() == ["a", "b"])
    try defaults.remove(a)
    #expect(try defaults.get(a) == nil)
  }

  /// After an interruption SQLite rolls the whole transaction back by itself: a `body` that
  /// catches that error and goes on must not get its later writes committed one by one. (GRDB's
  /// `inTransaction` refused them; since the store's writes use cached BEGIN and COMMIT
  /// statements instead, `DefaultsTransaction` does.)
  @Test func writesAfterSQLiteRolledTheTransactionBackAreRefused() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("tx")
    let (a, b, c) = (DefaultsKey<Int>("a"), DefaultsKey<Int>("b"), DefaultsKey<Int>("c"))
    var caught: (any Error)?
    #expect(throws: LiaisonError.self) {
      try defaults.transaction { tx in
        try tx.set(1, for: a)
        try tx.set(2, for: b)
        // A write interrupted while it runs: SQLite rolls the whole transaction back.
        let store = defaults.store
        tx.db.add(
          function: DatabaseFunction("interrupt_now", argumentCount: 0, pure: false) { _ in
            store.interrupt()
            return true
          })
        do {
          try tx.db.execute(sql: "UPDATE defaults_entry SET kind = kind WHERE interrupt_now()")
        } catch {
          caught = error
        }
        try tx.set(3, for: c)
      }
    }
    #expect((caught as? DatabaseError)?.resultCode == .SQLITE_INTERRUPT, "\(String(describing: caught))")
    #expect(try defaults.get(a) == nil)
    #expect(try defaults.get(b) == nil)
    #expect(try defaults.get(c) == nil)
    try defaults.set(4, for: c)  // the store goes on
    #expect(try defaults.get(c) == 4)
  }

  @Test func typedValuesRawDataAndMismatchedTypes() throws {
    struct Token: Codable, Sendable, Equatable {
      var value: String
      var expires: Date
    }
    let defaults = try SharedContainer(directory: directory.path).defaults("types")
    let token = Token(value: "abc", expires: Date(timeIntervalSince1970: 1_800_000_000))
    try defaults.set(token, for: DefaultsKey<Token>("token"))
    #expect(try defaults.get(DefaultsKey<Token>("token")) == token)
    try defaults.set(Data([0, 1, 2]), for: DefaultsKey<Data>("blob"))
    #expect(try defaults.get(DefaultsKey<Data>("blob")) == Data([0, 1, 2]))
    // No bytes is a value (an empty blob, not NULL), read back as such from the cache and the store.
    try defaults.set(Data(), for: DefaultsKey<Data>("empty"))
    #expect(try defaults.get(DefaultsKey<Data>("empty")) == Data())
    #expect(try defaults.rawValue(for: LiaisonName("empty")) == .data(Data()))
    // An optional Data with a value is its bytes too, as it was before the casts were taken out.
    try defaults.set(Optional(Data([3])), for: DefaultsKey<Data?>("maybe"))
    #expect(try defaults.rawValue(for: LiaisonName("maybe")) == .data(Data([3])))
    #expect(try defaults.get(DefaultsKey<Data?>("maybe")) == .some(.some(Data([3]))))
    #expect {
      _ = try defaults.get(DefaultsKey<Int>("token"))
    } throws: { ($0 as? LiaisonError)?.code == .typeMismatch }
  }

  /// An app that posts GRDB's `Database.suspendNotification` itself (as GRDB documents for iOS)
  /// suspends the store's writes too: the store's `BEGIN` is GRDB's own statement, which GRDB
  /// refuses while suspended, so nothing is written; reads go on; after the resume notification,
  /// writes do too. In another process, since the notification is process-wide.
  @Test func grdbsSuspensionNotificationStopsTheStoresWrites() throws {
    let peer = try Peer(container: directory.path)
    #expect(try peer.ask(.dset, "grdb", "count", "1") == "ok set")
    #expect(try peer.ask(.grdbSuspend) == "ok posted")
    let refused = try peer.ask(.dset, "grdb", "count", "2")
    #expect(refused.hasPrefix("error suspended: "), "\(refused)")
    #expect(try peer.ask(.dget, "grdb", "count") == "ok 1")
    #expect(try SharedContainer(directory: directory.path).defaults("grdb").get(DefaultsKey<Int>("count")) == 1)
    #expect(try peer.ask(.grdbResume) == "ok posted")
    #expect(try peer.ask(.dset, "grdb", "count", "3") == "ok set")
    #expect(try SharedContainer(directory: directory.path).defaults("grdb").get(DefaultsKey<Int>("count")) == 3)
  }

  @Test func oversizedValuesAndBadKeysAreRefused() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("limits")
    #expect {
      try defaults.set(Data(count: SharedDefaults.maximumValueSize + 1), for: DefaultsKey<Data>("big"))
    } throws: { error in
      let error = error as? LiaisonError
      return error?.code == .tooLarge && error?.message.contains("\(SharedDefaults.maximumValueSize)") == true
    }
    #expect { _ = try DefaultsKey<Int>(validating: "../key") } throws: { ($0 as? LiaisonError)?.code == .invalidName }
    #expect { _ = try SharedContainer(directory: directory.path).defaults("bad domain") } throws: {
      ($0 as? LiaisonError)?.code == .invalidName
    }
  }

  @Test(arguments: ["garbage", "truncated"])
  func aDamagedStoreIsAClearErrorAndIsNotReplaced(_ damage: String) throws {
    // Made in a peer, so that this process has not opened (and cached) the store.
    let maker = try Peer(container: directory.path)
    try maker.send(.dset, "precious", "key", "42")
    maker.kill()
    let file = directory.path + "/.liaison/store/defaults.sqlite"
    for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
    if damage == "garbage" {
      try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: file))
    } else {
      let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
      try handle.truncate(atOffset: 100)
      try handle.close()
    }
    let damaged = try Data(contentsOf: URL(fileURLWithPath: file))
    let reader = try Peer(container: directory.path)
    let answer = try reader.ask(.dget, "precious", "key")
    #expect(answer.hasPrefix("error corrupt file"), "\(answer)")
    #expect(answer.contains("defaults.sqlite"))
    #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == damaged)
  }

  /// SQLite locks files for reads as well as writes, and iOS must not find a suspended process
  /// holding or waiting for such a lock: `suspend()` waits for a store access in progress, and
  /// refuses every access (a read that misses the cache too) until `resume()`.
  @Test func suspendWaitsForAStoreWriteInProgressAndRefusesReadsAndWritesUntilResume() throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("app")
    let uncached = try container.defaults("app")
    let key = DefaultsKey<Int>("count")
    try defaults.set(1, for: key)
    // The domain's generation counter is odd from before a write's transaction until after it
    // ended, whether it committed or not.
    let slot = GenerationCounters.slot(for: "app")
    let inTransaction = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    Thread {
      _ = try? defaults.transaction { transaction in
        inTransaction.signal()
        try waitUntil("suspend() has started") { container.isSuspended }
        for n in 2...50 { try transaction.set(n, for: key) }
      }
      done.signal()
    }.start()
    inTransaction.wait()
    container.suspend()
    #expect(defaults.store.generations.load(slot) & 1 == 0, "suspend() returned while a store write was in progress")
    done.wait()
    #expect(throws: LiaisonError.self) { _ = try uncached.get(key) }
    #expect(throws: LiaisonError.self) { try defaults.set(3, for: key) }
    do throws(LiaisonError) {
      _ = try uncached.get(key)
    } catch {
      #expect(error.code == .suspended)
    }
    try container.resume()
    #expect(try uncached.get(key) == 50)
  }
}
