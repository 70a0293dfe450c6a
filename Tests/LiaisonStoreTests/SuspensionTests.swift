import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

/// `suspend()`'s promise: when it returns, this process holds and waits for no lock in the
/// container, whatever was in flight. Checked in the kernel's own table of locks.
@Suite("suspend() across processes")
struct SuspensionTests {
  let directory = TemporaryDirectory()

  /// After `suspend()`, another process's commits to a shared database are not relayed to this
  /// process's observations (a relay reads the database: a read lock in its `-shm`) until
  /// `resume()`, which relays them. Before, the relay ran while suspended.
  @Test func aSharedDatabaseRelaysNothingWhileSuspendedAndEverythingAtResume() async throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.dbopen, "items", "1")
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    }
    let database = try await container.database("items", migrator: migrator)
    let seen = Locked<[Int]>([])
    let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 }
      .start(in: database.pool, scheduling: .async(onQueue: DispatchQueue(label: "seen"))) { _ in
      } onChange: { count in
        seen.withLock { $0.append(count) }
      }
    defer { observation.cancel() }
    // The database's own signal, observed here too: once it has a post, the relay had its turn.
    let commits = try Signal(
      name: try LiaisonName("items"), folder: try container.privateFolder(.databaseSignals), container: container)
    let posts = Locked(0)
    let watch = try commits.observe(on: DispatchQueue(label: "posts")) { _ in posts.withLock { $0 += 1 } }
    defer { watch.cancel() }

    try peer.send(.dbinsert, "items", "1")
    try await waitUntilOffThePool("the first commit is relayed") { seen.withLock { $0.last } == 1 }
    container.suspend()
    let postsBefore = posts.withLock { $0 }
    try peer.send(.dbinsert, "items", "2")
    try await waitUntilOffThePool("the commits' posts arrive") { posts.withLock { $0 } > postsBefore }
    // Every relay asks first whether the container is suspended, and defers itself to resume()
    // if so: once one is deferred, none reads while suspended (the old code deferred none).
    try await waitUntilOffThePool("a relay is deferred to resume()") { container.actionsOwedAtResume > 0 }
    #expect(seen.withLock { $0.last } == 1, "relayed while suspended: \(seen.withLock { $0 })")
    try container.resume()
    try await waitUntilOffThePool("the commits are relayed at resume()") { seen.withLock { $0.last } == 3 }
  }

  /// A post, a store's opening (the growth of its counters file), and a database write, each
  /// blocked on a lock another process holds, a presence being watched and a store open (the
  /// mailboxes'): `suspend()` ends the
  /// three waits with errors and returns, and `/proc/locks` then lists no lock of this process on
  /// the container's files: the store's pools are closed, and the shared database's, which is the
  /// user's, keeps only the two that SQLite's unix VFS keeps for as long as a connection in WAL
  /// mode is open, idle or not (a shared lock on the database file's lock bytes, and one on the
  /// `-shm` file's byte 128), until it is closed (see *Apple Platforms*). After `resume()`, the
  /// store opens again at its first access.
  @Test(.enabled(if: readsProc, "reads /proc/locks"))
  func suspendEndsEveryWaitAndLeavesNoLock() async throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    let liaison = directory.path + "/.liaison"

    let jobs = try await container.mailbox("jobs", sender: "app")
    try await jobs.send("first")
    let signal = try container.signal("changed")
    try peer.send(.holdFileLock, "\(liaison)/signals/changed")
    try peer.send(.dset, "settings", "launches", "1")  // makes the store, and its counters file
    try peer.send(.holdFileLock, "\(liaison)/store/defaults.generations")
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY)") }
    let database = try await container.database("items", migrator: migrator)
    try peer.send(.dbholdwrite, "items")
    try peer.send(.claim, "recording")  // a presence claimed by the peer, watched here
    let changes = try container.presence("recording").changes()
    let watch = Task.detached { for try await _ in changes {} }
    defer { watch.cancel() }

    let outcomes = Locked<[String: String]>([:])
    func run(_ name: String, _ body: @escaping @Sendable () throws -> Void) {
      Thread.detachNewThread {
        let outcome: String
        do {
          try body()
          outcome = "done"
        } catch let error as LiaisonError {
          outcome = "\(error.code)"
        } catch {
          outcome = "\(error)"
        }
        outcomes.withLock { $0[name] = outcome }
      }
    }
    let busyBefore = SharedDatabase.busyWaits.value
    run("post") { try signal.post(state: 1) }
    run("store") { _ = try container.defaults("settings") }
    run("write") { try database.pool.write { db in try db.execute(sql: "INSERT INTO item DEFAULT VALUES") } }
    try waitUntil("the post and the store wait in the kernel, and the write in SQLite's busy handler") {
      let waits = try kernelLocks().filter { $0.pid == getpid() && $0.waiting }.map(\.inode)
      let postWaits = waits.contains(try inode(liaison + "/signals/changed"))
      let storeWaits = waits.contains(try inode(liaison + "/store/defaults.generations"))
      return postWaits && storeWaits && SharedDatabase.busyWaits.value > busyBefore + 1
    }

    let givenUpBefore = SharedDatabase.busyWaitsEndedBySuspension.value
    // suspend() waits for this process's own operations, never for the other process, which
    // keeps every lock until the end: the post and the store's opening would wait for ever, the
    // write 30 s. What it costs in time is liaison-bench's `suspend.interrupting`.
    container.suspend()
    try waitUntil("the three operations ended") { outcomes.withLock { $0.count } == 3 }
    let ended = outcomes.withLock { $0 }
    #expect(ended["post"] == "suspended")
    #expect(ended["store"] == "suspended")
    #expect(ended["write"]?.contains("SQLite error") == true, "the write ended with \(ended["write"] ?? "")")
    #expect(
      SharedDatabase.busyWaitsEndedBySuspension.value > givenUpBefore,
      "the write's wait was not ended by suspend()")

    // The presence's holder leaves while suspended: the watch follows without taking a lock.
    try peer.send(.release, "recording")
    #expect(try !container.presence("recording").isActive)
    // The store's pools were closed: no lock on its files. The shared database's pool, the
    // user's, is open: its connections keep the two shared locks of an open connection in WAL
    // mode, and nothing else, until it is closed.
    let files = try containerInodes(directory.path)
    let mine = { try kernelLocks().filter { $0.pid == getpid() && files[$0.inode] != nil } }
    let held = try mine()
    let notAnOpenConnection = held.filter { lock in
      let file = files[lock.inode]!
      let openConnection =
        lock.kind == "POSIX" && !lock.exclusive && file.contains("/.liaison/databases/")
        && (file.hasSuffix(".sqlite") && lock.start == 1_073_741_826 || file.hasSuffix("-shm") && lock.start == 128)
      return !openConnection
    }
    #expect(
      notAnOpenConnection.isEmpty, "after suspend(): \(notAnOpenConnection.map { "\($0) on \(files[$0.inode]!)" })")
    try database.close()
    try database.close()  // a second close does nothing
    let left = try mine()
    #expect(left.isEmpty, "once the database is closed: \(left.map { "\($0) on \(files[$0.inode]!)" })")

    // Resumed, with the other process's locks gone, everything works again.
    try container.resume()
    try peer.send(.releaseFileLock, "\(liaison)/signals/changed")
    try peer.send(.releaseFileLock, "\(liaison)/store/defaults.generations")
    try peer.send(.dbrelease, "items")
    try signal.post(state: 2)
    #expect(try signal.state == 2)
    // The store opens its pool again at its first access; the database is opened again.
    let settings = try await container.defaults("settings")
    #expect(try settings.get(DefaultsKey<Int>("launches")) == 1)
    try await settings.set(2, for: DefaultsKey<Int>("launches"))
    #expect(try peer.send(.dget, "settings", "launches") == "2")
    try await jobs.send("second")
    #expect(try jobs.peek().count == 2)
    let reopened = try await container.database("items", migrator: migrator)
    try await reopened.pool.write { db in try db.execute(sql: "INSERT INTO item DEFAULT VALUES") }
    await #expect(throws: DatabaseError.self) { try await database.pool.read { _ in } }
  }
  /// GRDB's suspension is process-wide: resuming one container must not let the pools of another,
  /// still suspended, take SQLite's locks again; so pools that observe it stay suspended until
  /// every container with such a pool is resumed. (In a peer: GRDB's notifications would reach
  /// every test of this process.)
  @Test func resumingOneContainerLeavesAnotherSuspendedDatabaseSuspended() throws {
    let other = TemporaryDirectory()
    let peer = try Peer(container: directory.path)
    let outcomes = try peer.send(.dbsuspension, other.path)
    #expect(outcomes == "refused refused written written", "here and there with one resumed, then both")
  }

  /// The first access after `resume()` opens the store's pool again, and SQLite's busy handler
  /// may run during that opening (here another program holds the database in exclusive locking
  /// mode): it asks whether the container is suspended, which once took the lock the opening
  /// held, and the access hung for good. It waits for the other program instead, and writes.
  @Test func reopeningAfterResumeWaitsForAnotherProgramsLock() throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("reopen")
    let key = DefaultsKey<Int>("count")
    try defaults.set(1, for: key)
    container.suspend()  // closes the store's pool
    try container.resume()
    var configuration = Configuration()
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
    let other = try DatabaseQueue(
      path: directory.path + "/.liaison/store/defaults.sqlite", configuration: configuration)
    try other.read { db in _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema") }  // takes the lock
    let waitsBefore = SharedDefaults.sqliteBusyWaits
    let written = Locked<String?>(nil)
    Thread.detachNewThread {
      do {
        try defaults.set(2, for: key)
        written.withLock { $0 = "written" }
      } catch {
        written.withLock { $0 = "\(error)" }
      }
    }
    try waitUntil("the opening waits in SQLite's busy handler") { SharedDefaults.sqliteBusyWaits > waitsBefore }
    try other.close()
    try waitUntil("the write returns") { written.withLock { $0 } != nil }
    #expect(written.withLock { $0 } == "written")
    #expect(try defaults.get(key) == 2)
  }

  /// A write whose `BEGIN` failed inside SQLite (here: it waited for another program's write
  /// lock, and `suspend()` ended the wait) leaves the next write free: the store keeps its `BEGIN`
  /// statement from one write to the next, and a statement that failed would otherwise report its
  /// old error to the next write, which GRDB's execution starts by resetting it.
  @Test func aWriteWhoseBeginFailedLeavesTheNextOneFree() async throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try await container.defaults("begin")
    let key = DefaultsKey<Int>("count")
    try await defaults.set(1, for: key)
    // Another program, which takes no lock of Liaison's, holds SQLite's write lock.
    var configuration = Configuration()
    configuration.allowsUnsafeTransactions = true  // the transaction outlives the access
    let other = try DatabaseQueue(
      path: directory.path + "/.liaison/store/defaults.sqlite", configuration: configuration)
    try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
    let waitsBefore = SharedDefaults.sqliteBusyWaits
    let write = Task.detached { try await defaults.set(2, for: key) }
    try await waitUntilOffThePool("the write waits for SQLite's lock", timeout: 300) {
      SharedDefaults.sqliteBusyWaits > waitsBefore
    }
    container.suspend()
    await #expect(throws: LiaisonError.self) { try await write.value }
    try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
    try container.resume()
    try await defaults.set(3, for: key)
    #expect(try defaults.get(key) == 3)
  }

  /// A defaults write rings while it holds the store's lock, so that the lock's release tells a
  /// dead writer; but a poster stuck on the domain's signal (stopped, or another program's lock)
  /// must not keep the store's lock too: the write rings after releasing it, and every other
  /// writer goes on meanwhile.
  @Test(.enabled(if: readsProc, "reads /proc/locks"))
  func aStuckPosterDoesNotHoldTheStoresLock() async throws {
    let container = try SharedContainer(directory: directory.path)
    let stuck = try Peer(container: directory.path)
    let other = try Peer(container: directory.path)
    try other.send(.dset, "settings", "volume", "1")  // makes the store and the domain's signal
    let signal = "\(directory.path)/.liaison/store-signals/settings"
    try stuck.send(.holdFileLock, signal)
    let settings = try await container.defaults("settings")
    let written = Locked(false)
    Thread.detachNewThread {
      try? settings.set(2, for: DefaultsKey<Int>("volume"))  // its ring waits for the stuck poster
      written.withLock { $0 = true }
    }
    let signalFile = try inode(signal)
    try waitUntil("the write waits for the signal's lock") {
      try kernelLocks().contains { $0.pid == getpid() && $0.waiting && $0.inode == signalFile }
    }
    // Committed, and the store's lock free for the other writers meanwhile.
    #expect(try other.send(.dget, "settings", "volume") == "2")
    #expect(try other.send(.probeFileLock, "\(directory.path)/.liaison/store/defaults.write") == "free")
    #expect(!written.withLock { $0 })
    try stuck.send(.releaseFileLock, signal)
    try waitUntil("the write returned") { written.withLock { $0 } }
  }
}

/// Every file and folder under the test's container, by inode.
private func containerInodes(_ root: String) throws -> [UInt64: String] {
  var found: [UInt64: String] = [:]
  let enumerator = FileManager.default.enumerator(atPath: root)
  while let relative = enumerator?.nextObject() as? String {
    let path = root + "/" + relative
    found[try inode(path)] = path
  }
  return found
}

/// One line of `/proc/locks`.
private struct KernelLock: CustomStringConvertible {
  let kind: String
  let exclusive: Bool
  let waiting: Bool
  let pid: Int32
  let inode: UInt64
  let start: UInt64
  var description: String {
    "\(waiting ? "waiting for " : "")\(kind) \(exclusive ? "WRITE" : "READ") from \(start) by \(pid)"
  }
}

/// The locks the kernel lists now, held or waited for.
private func kernelLocks() throws -> [KernelLock] {
  try KernelLocks.lines().compactMap { line in
    // "1: FLOCK  ADVISORY  WRITE 123 08:01:4567 0 EOF", or "1: -> FLOCK …" for a waiter.
    var words = line.split(separator: " ").dropFirst()
    let waiting = words.first == "->"
    if waiting { words = words.dropFirst() }
    let fields = Array(words)
    guard fields.count >= 5, let pid = Int32(fields[3]),
      let inode = fields[4].split(separator: ":").last.flatMap({ UInt64($0) })
    else { return nil }
    return KernelLock(
      kind: String(fields[0]), exclusive: fields[2] == "WRITE", waiting: waiting, pid: pid, inode: inode,
      start: fields.count > 5 ? UInt64(fields[5]) ?? 0 : 0)
  }
}

private func inode(_ path: String) throws -> UInt64 {
  var info = stat()
  guard stat(path, &info) == 0 else { throw PeerError("cannot stat \(path)") }
  return UInt64(info.st_ino)
}
