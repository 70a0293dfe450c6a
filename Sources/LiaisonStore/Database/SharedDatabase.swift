import Dispatch
import Foundation
import GRDB
import Liaison

/// One SQLite database that several processes share, with their `ValueObservation`s refreshed by
/// each other's commits: Core Data in the App Group, made safe.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("v1") { db in
///   try db.create(table: "note") { t in t.autoIncrementedPrimaryKey("id"); t.column("text", .text) }
/// }
/// let shared = try container.database("notes", migrator: migrator)
/// try shared.pool.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('hi')") }
///
/// // In another process, this observation sees the insert:
/// let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM note") ?? 0 }
/// for try await count in observation.values(in: shared.pool) { print(count) }
/// ```
///
/// ``pool`` is an ordinary GRDB `DatabasePool` (WAL mode), the user's to use as GRDB documents.
/// Liaison adds what several processes need:
///
/// - **One migration, once.** The database is opened and `migrator` runs under a process lock, so
///   each migration runs exactly once however many processes open it at the same moment. A
///   database migrated by a newer program, with migrations this one does not know, is refused with
///   ``/Liaison/LiaisonError/Code/incompatibleSchema`` and left unchanged.
/// - **Cross-process observation.** After every commit in any process, the database's signal rings;
///   every other process then calls `notifyChanges(in: .fullDatabase)`, so its `ValueObservation`s
///   fetch again.
/// - **No lost wake-up.** A writer killed between its commit and its ring still refreshes the
///   others' observations: on Linux its death closes its descriptors on the database file, which
///   the event loop sees (`IN_CLOSE_WRITE`); on Apple platforms, which report no close, its
///   commit's write of the `-wal` file is looked at. If the data version moved, the change is
///   relayed. A relay that fails (busy, suspended) is tried again until it succeeds.
/// - **No sleeping on contention.** When another process holds SQLite's write lock, SQLite's busy
///   handler waits for that process's commit (or rollback) signal instead of sleeping 1, 2, 5 …
///   100 ms, and retries at once when it arrives (at most 50 ms per wait, for a writer that does
///   not ring); a lock attempt gives up with `SQLITE_BUSY` after 30 s of waiting.
/// - **No write into a deleted file.** If the database file is deleted or replaced while the pool
///   is open, every later commit is rolled back with a ``/Liaison/LiaisonError/Code/system`` error that
///   names the file (SQLite would write it into the deleted file, to be lost): restart the
///   processes that use it.
/// - ``/Liaison/SharedContainer/suspend()`` ends what runs on the pool: the busy handler gives up,
///   the statements running are interrupted (`SQLITE_INTERRUPT`, and their transactions roll
///   back), and `suspend()` returns once the accesses that were running have ended. The pool
///   stays open, with the two shared locks an open connection in WAL mode keeps: to hold none
///   while suspended, ``close()`` it first and open it again after `resume()`. To keep your
///   later writes from locking too, set the configuration's `observesSuspensionNotifications`, as
///   GRDB recommends on iOS: `suspend()` then posts GRDB's `Database.suspendNotification` (writes
///   fail with `SQLITE_ABORT` until `resume()`; reads in WAL mode go on), and `resume()` its
///   `resumeNotification` once no container of the process with such a database is suspended.
///   GRDB's notifications are process-wide: every GRDB database of the process that observes them
///   is suspended with the container, and resumed only with the last one.
public final class SharedDatabase: Sendable {
  /// How often relaying other processes' commits failed in this process (each is tried again).
  package static let relayFailures = TestCounter()
  /// How often SQLite's busy handler of a shared database ran in this process (for tests).
  package static let busyWaits = TestCounter()
  /// How often that busy handler gave up because the container was suspended (for tests).
  package static let busyWaitsEndedBySuspension = TestCounter()

  /// The database's name.
  public let name: LiaisonName
  /// The GRDB pool: read, write and observe it as GRDB documents.
  public let pool: DatabasePool
  /// The database file, for messages and tools.
  public let path: String
  private let signal: Signal
  private let remoteCommits: SignalObservation
  /// Closes of the database file by other connections, such as a writer's death.
  private let writerCloses: EventRegistration
  private let doorbell: CommitDoorbell
  private let commitRinger: CommitRinger
  private let lifecycle: DatabaseLifecycle
  /// Cleared when this value is released, so that a relay being retried stops (and lets the pool
  /// go) instead of retrying for the life of the process.
  private let isOpen = Locked(true)

  deinit { isOpen.withLock { $0 = false } }

  /// When a look at a writer's event that found nothing new looks again (see the relay).
  private static let laterLooks: [DispatchTimeInterval] = [.milliseconds(20), .milliseconds(100), .milliseconds(500)]

  /// Closes the pool and ends what this value does in the container: it no longer follows other
  /// processes' commits, nor takes part in ``/Liaison/SharedContainer/suspend()``. Once closed,
  /// this process holds no lock on the database's files; every access of ``pool`` then throws
  /// (GRDB's "Connection is closed"). Open it again with
  /// ``Liaison/SharedContainer/database(_:migrator:configuration:timeout:)-8705m``.
  ///
  /// This is how an app makes sure it holds no SQLite lock at all while suspended: an open
  /// connection in WAL mode keeps two shared locks for as long as it is open, idle or not (see
  /// *Apple Platforms*). Close it before ``/Liaison/SharedContainer/suspend()``, and open it again
  /// after ``/Liaison/SharedContainer/resume()``. Accesses in progress are waited for; your
  /// observations of the pool end with an error, so start them again on the new one. Closing
  /// twice does nothing.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when SQLite refuses to close a
  ///   connection because statements you prepared on it are still alive (release them first).
  public func close() throws(LiaisonError) {
    isOpen.withLock { $0 = false }
    remoteCommits.cancel()
    writerCloses.cancel()
    lifecycle.end()
    do {
      try pool.close()
    } catch {
      throw LiaisonError(
        .invalidArgument,
        "The shared database '\(path)' cannot be closed: \(error). SQLite refuses to close a connection while "
          + "statements prepared on it are alive: release them, then close it again.",
        path: path, cause: error)
    }
  }

  /// Opens the database `name`, holding `held`, its opening lock (see ``openingLock(_:in:)``).
  init(
    name: LiaisonName, container: SharedContainer, migrator: DatabaseMigrator, configuration: Configuration,
    holding held: LockGuard
  ) throws(LiaisonError) {
    self.name = name
    let folder = try container.privateFolder(.databases)
    let file = name.rawValue + ".sqlite"
    path = folder.path(of: file)
    signal = try Signal(name: name, folder: try container.privateFolder(.databaseSignals), container: container)

    let doorbell = CommitDoorbell()
    self.doorbell = doorbell
    var configuration = configuration
    configuration.busyMode = .callback { attempts in
      SharedDatabase.busyWaits.increment()
      return doorbell.waitForCommit(attempts: attempts)
    }

    // Holding the lock, the pool is always opened.
    let (pool, _, migrationsRan) = try SharedPool.open(
      file, in: folder, configuration: configuration, migrator: migrator, guardingCommits: true, holding: held)!
    self.pool = pool
    let signal = signal
    let commitRinger = CommitRinger(signal: signal)
    self.commitRinger = commitRinger
    pool.add(transactionObserver: commitRinger, extent: .databaseLifetime)
    // Another process committed: wake this process's busy waiters, and refresh its observations.
    // Own commits need neither (observations see them already), so they are ignored.
    let refreshQueue = DispatchQueue(label: "Liaison.SharedDatabase.\(name)")
    let isOpen = isOpen
    // Whether a relay waits for resume() already: the commits made meanwhile are all relayed then.
    let owedAtResume = Locked(false)
    // Whether a later look is queued after a look at a writer's event that found nothing new.
    let lookQueued = Locked(false)
    /// `look`: 0 for a look at a writer's event; 1, 2, 3 for the later looks after one that found
    /// nothing new.
    @Sendable func relay(onlyIfChanged: Bool, attempt: Int, look: Int = 0) {
      if look > 0 { lookQueued.withLock { $0 = false } }
      guard isOpen.withLock({ $0 }) else { return }
      // A relay reads the database (a read lock in the -shm): none while the container is
      // suspended. It is made at resume() instead, once for every commit meanwhile.
      if container.isSuspended {
        let first = owedAtResume.withLock { owed in
          defer { owed = true }
          return !owed
        }
        if first {
          container.afterResume {
            owedAtResume.withLock { $0 = false }
            refreshQueue.async { relay(onlyIfChanged: false, attempt: 0) }
          }
        }
        return
      }
      do {
        // Observers fetch when a transaction commits, so the change is notified inside one: an
        // empty deferred transaction, which takes no SQLite lock. It runs on GRDB's writer queue,
        // one access at a time, so the flag that keeps it from ringing covers it and nothing else.
        let foundNothing = try pool.writeWithoutTransaction { db -> Bool in
          // Moves with every commit of another connection (another process), never with this
          // writer's own: the commits that this process's observations have not seen yet.
          // Cached, as the transaction's statements below: a relay compiles nothing.
          let dataVersion = try Int.fetchOne(db.cachedStatement(sql: "PRAGMA data_version"))
          let seen = commitRinger.dataVersion.withLock { seen in
            defer { seen = dataVersion }
            return seen
          }
          if onlyIfChanged && seen == dataVersion { return true }
          commitRinger.relaying.withLock { $0 = true }
          defer { commitRinger.relaying.withLock { $0 = false } }
          // The other process may have changed the schema (created tables): GRDB's writer never
          // rereads it by itself. Cleared only when it changed, as rereading it costs every fetch.
          let schemaVersion = try db.schemaVersion()
          if commitRinger.schemaVersion.withLock({ $0 }) != schemaVersion {
            db.clearSchemaCache()
            commitRinger.schemaVersion.withLock { $0 = schemaVersion }
          }
          try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
          do {
            try db.notifyChanges(in: .fullDatabase)
            try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
          } catch {
            try? db.rollback()
            throw error
          }
          return false
        }
        // A writer's event (on Apple platforms, its write of the -wal) can come before it has
        // published its commit in the -shm: the look then finds nothing new, and the commit's
        // ring may never come (the writer was killed in between). So a look that found nothing
        // looks again, later each time (20, 100, 500 ms), one chain of looks at a time: this
        // process's own commits, which move nothing here, cost at most a few looks a second.
        if onlyIfChanged, foundNothing, look < Self.laterLooks.count,
          lookQueued.withLock({ queued in
            defer { queued = true }
            return !queued
          })
        {
          // A Dispatch timer on the refresh queue, which the looks run on: no decision reads a clock.
          refreshQueue.asyncAfter(deadline: .now() + Self.laterLooks[look]) {
            relay(onlyIfChanged: true, attempt: 0, look: look + 1)
          }
        }
      } catch {
        // Busy for 30 s, or suspended: try again, later each time (at most every 5 s), until the
        // change is relayed; it is never dropped.
        commitRinger.dataVersion.withLock { $0 = nil }
        SharedDatabase.relayFailures.increment()
        let delay = min(100 << min(attempt, 6), 5_000)
        // A Dispatch timer on the refresh queue, as the later looks above.
        refreshQueue.asyncAfter(deadline: .now() + .milliseconds(delay)) {
          relay(onlyIfChanged: false, attempt: attempt + 1)
        }
      }
    }
    remoteCommits = try signal.observe(on: refreshQueue, ignoringOwnPosts: true) { _ in
      relay(onlyIfChanged: false, attempt: 0)
    }
    // A writer killed between its commit and its ring: its connections close when it dies, and
    // every connection has the database file open for writing (Linux reports the close). Apple
    // platforms report no close: there every write of the log is looked at, which a commit makes.
    // Relayed if the data moved.
    writerCloses = try folder.watchWriterCloses(of: file, trace: file + "-wal") {
      refreshQueue.async { relay(onlyIfChanged: true, attempt: 0) }
    }
    let busyWakeups = try signal.observe(on: DispatchQueue.global(), ignoringOwnPosts: true) { _ in
      doorbell.ring()
    }
    // The handlers capture the pool, the doorbell and the suspension, not `lifecycle`, which
    // keeps them.
    let suspension = PoolSuspension(observed: configuration.observesSuspensionNotifications)
    lifecycle = DatabaseLifecycle(
      busyWakeups: busyWakeups, suspension: suspension,
      suspensionHandlers: container.registerSuspensionHandlers(
        suspend: {
          doorbell.suspend()
          pool.interrupt()  // what runs now ends (SQLITE_INTERRUPT), and its transaction rolls back
          suspension.suspend()
        },
        finish: { DatabaseLifecycle.waitForAccesses(in: pool) },
        resume: {
          doorbell.resume()
          suspension.resume()
        }))
    if migrationsRan { try? signal.post() }  // other processes may observe tables just created
  }
}

extension SharedDatabase {
  /// The lock that the openers of the database `name` take in turn, so that one migrates it and
  /// none waits inside SQLite: in a folder of its own, named as the database (so that every valid
  /// name fits).
  static func openingLock(_ name: LiaisonName, in container: SharedContainer) throws(LiaisonError) -> ProcessLock {
    ProcessLock(name: name, folder: try container.privateFolder(.databaseLocks), container: container)
  }

  static func openingTimedOut(_ name: LiaisonName, _ timeout: Duration?) -> LiaisonError {
    LiaisonError(
      .timedOut,
      "Timed out after \(timeout.map { "\($0)" } ?? "waiting") while another process opened or migrated the shared "
        + "database '\(name)' (a process stopped while migrating holds it). Try again later, or wait longer.")
  }
}

extension SharedContainer {
  /// The shared database called `name`, opened and migrated with `migrator` once across processes.
  ///
  /// Waits, blocking the calling thread, while another process opens or migrates the database;
  /// the `async` twin waits without blocking a thread of the cooperative pool.
  ///
  /// - Parameters:
  ///   - name: the database's name, which follows the naming rule (``/Liaison/LiaisonName/rule``).
  ///   - migrator: the database's migrations, run once across processes when it is opened.
  ///   - configuration: GRDB's configuration for the pool. Its `busyMode` is replaced by Liaison's
  ///     (see ``SharedDatabase``); everything else is kept.
  ///   - timeout: how long to wait at most for another process's opening (its migration); `nil`
  ///     waits as long as it takes.
  /// - Throws: ``/Liaison/LiaisonError/Code/incompatibleSchema`` when a newer program migrated the
  ///   database; ``/Liaison/LiaisonError/Code/corruptFile`` when the file is damaged;
  ///   ``/Liaison/LiaisonError/Code/invalidName`` when `name` breaks the naming rule;
  ///   ``/Liaison/LiaisonError/Code/timedOut`` when another process's opening lasts longer than `timeout`.
  @available(*, noasync, message: "Use `try await database(_:migrator:configuration:timeout:)`, which does not block.")
  public func database(
    _ name: String, migrator: DatabaseMigrator, configuration: Configuration = Configuration(),
    timeout: Duration? = nil
  ) throws(LiaisonError) -> SharedDatabase {
    let name = try LiaisonName(name)
    let held: LockGuard
    do {
      held = try SharedDatabase.openingLock(name, in: self).lock(timeout: timeout)
    } catch let error where error.code == .timedOut {
      throw SharedDatabase.openingTimedOut(name, timeout)
    }
    return try SharedDatabase(
      name: name, container: self, migrator: migrator, configuration: configuration, holding: held)
  }

  /// The shared database called `name`, opened and migrated with `migrator` once across
  /// processes, waiting for another process's opening (its migration) without blocking a thread
  /// of the cooperative pool.
  ///
  /// - Throws: what the blocking form throws, and ``/Liaison/LiaisonError/Code/cancelled`` when the
  ///   task is cancelled while waiting.
  public func database(
    _ name: String, migrator: DatabaseMigrator, configuration: Configuration = Configuration(),
    timeout: Duration? = nil
  ) async throws(LiaisonError) -> SharedDatabase {
    let name = try LiaisonName(name)
    let held: LockGuard
    do {
      held = try await SharedDatabase.openingLock(name, in: self).lock(timeout: timeout)
    } catch let error where error.code == .timedOut {
      throw SharedDatabase.openingTimedOut(name, timeout)
    }
    return try SharedDatabase(
      name: name, container: self, migrator: migrator, configuration: configuration, holding: held)
  }
}

/// Rings the database's signal after every commit (and rollback) in this process, except the
/// commits that only relay another process's changes to this process's observers.
private final class CommitRinger: TransactionObserver, Sendable {
  let signal: Signal
  /// Set while a relaying transaction runs, on GRDB's writer queue, which runs one access at a
  /// time: no other commit can happen while it is set.
  let relaying = Locked(false)
  /// The schema version the writer's schema cache was last known to match.
  let schemaVersion = Locked<Int32?>(nil)
  /// The writer's `PRAGMA data_version` when another process's commits were last relayed.
  let dataVersion = Locked<Int?>(nil)
  init(signal: Signal) { self.signal = signal }
  func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
  func databaseDidChange(with event: DatabaseEvent) {}
  func databaseDidCommit(_ db: Database) {
    // A relay's empty commit neither rings nor is a write the test hook stops at.
    guard !relaying.withLock({ $0 }) else { return }
    StoreTestHooks.beforeRing.run()
    signal.ring(state: { nil })
  }
  /// A rollback frees SQLite's write lock too: ring, so that other processes' busy waiters retry
  /// at once (their observations fetch again and find nothing new).
  func databaseDidRollback(_ db: Database) {
    if !relaying.withLock({ $0 }) { signal.ring(state: { nil }) }
  }
}

/// What SQLite's busy handler waits on: the commits (and rollbacks) of other processes.
final class CommitDoorbell: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  private let waiters = Locked(0)
  /// Set by the container's suspension: a busy handler then gives up at once.
  private let suspended = Locked(false)
  /// When each connection's current lock attempt started waiting (busy handlers run on the
  /// connection's own thread), to give up after ``patience``.
  private let waitingSince = Locked<[ObjectIdentifier: UInt64]>([:])
  /// How long one wait lasts at most before SQLite retries anyway (a writer that does not ring).
  static let longestWait: DispatchTimeInterval = .milliseconds(50)
  /// How long a lock attempt waits in all before `SQLITE_BUSY` reaches the caller.
  static let patience: UInt64 = 30_000_000_000

  /// Measured on Dispatch's clock, not the container's: SQLite calls it on a blocked thread,
  /// and the semaphore's timeout is the kernel's.
  ///
  /// Called by SQLite's busy handler with the number of times it was called before for this lock
  /// attempt: waits for another process's commit (or 50 ms), then asks SQLite to retry, until the
  /// attempt has waited 30 s in all.
  func waitForCommit(attempts: Int) -> Bool {
    if suspended.withLock({ $0 }) {  // SQLITE_BUSY: a suspended process waits for no lock
      SharedDatabase.busyWaitsEndedBySuspension.increment()
      return false
    }
    let thread = ObjectIdentifier(Thread.current)
    let now = DispatchTime.now().uptimeNanoseconds
    let since = waitingSince.withLock { since -> UInt64 in
      if attempts == 0 || since[thread] == nil { since[thread] = now }
      return since[thread]!
    }
    guard now - since < Self.patience else {
      _ = waitingSince.withLock { $0.removeValue(forKey: thread) }
      return false
    }
    waiters.withLock { $0 += 1 }
    if semaphore.wait(timeout: .now() + Self.longestWait) == .timedOut {
      waiters.withLock { $0 = max(0, $0 - 1) }
    }
    return true
  }

  /// The container is being suspended: every busy handler waiting now wakes and gives up, and
  /// later ones give up at once, until ``resume()``.
  func suspend() {
    suspended.withLock { $0 = true }
    ring()
  }

  func resume() {
    suspended.withLock { $0 = false }
  }

  /// Another process committed or rolled back: wakes every waiting busy handler. (A wake-up that
  /// arrives just as a wait times out stays in the semaphore and only makes the next retry early.)
  func ring() {
    let count = waiters.withLock { waiters -> Int in
      defer { waiters = 0 }
      return waiters
    }
    for _ in 0..<count { semaphore.signal() }
  }
}

/// One shared database's part in GRDB's suspension, for a pool whose configuration observes
/// GRDB's suspension notifications. Those are process-wide: they suspend and resume every GRDB
/// database of the process that observes them, whatever its container. So the suspension is
/// posted when such a shared database's container is suspended, and the resumption only when none
/// is suspended any more: resuming one container never lets another's pools lock again, and its
/// own such pools stay suspended until then. A database released while suspended stops counting,
/// without posting anything.
final class PoolSuspension: Sendable {
  /// The shared databases of the process that observe the notifications and whose container is
  /// suspended.
  private static let suspendedCount = Locked(0)
  private let observed: Bool
  private let suspended = Locked(false)

  init(observed: Bool) { self.observed = observed }

  /// Suspends the pools as GRDB does: statements that would take a lock fail from now on
  /// (`SQLITE_ABORT`, `SQLITE_INTERRUPT`), and those running are interrupted; reads in WAL mode
  /// go on, as GRDB allows.
  func suspend() {
    guard observed else { return }
    let first = suspended.withLock { suspended -> Bool in
      defer { suspended = true }
      return !suspended
    }
    if first { Self.suspendedCount.withLock { $0 += 1 } }
    NotificationCenter.default.post(name: Database.suspendNotification, object: nil)
  }

  func resume() {
    if end() { NotificationCenter.default.post(name: Database.resumeNotification, object: nil) }
  }

  deinit { _ = end() }

  /// The database is closed: it stops counting, as when it is released.
  func leave() { _ = end() }

  /// Ends this database's suspension; returns whether no shared database is suspended any more.
  private func end() -> Bool {
    let was = suspended.withLock { suspended -> Bool in
      defer { suspended = false }
      return suspended
    }
    guard was else { return false }
    return Self.suspendedCount.withLock { count -> Bool in
      count = max(0, count - 1)
      return count == 0
    }
  }
}

/// What a shared database keeps alive besides its pool: the busy handlers' wake-ups, and its
/// part in the container's suspend and resume.
final class DatabaseLifecycle: Sendable {
  private let busyWakeups: SignalObservation
  private let suspensionHandlers: SuspensionHandlers

  private let suspension: PoolSuspension

  init(busyWakeups: SignalObservation, suspension: PoolSuspension, suspensionHandlers: SuspensionHandlers) {
    self.busyWakeups = busyWakeups
    self.suspensionHandlers = suspensionHandlers
    self.suspension = suspension
  }

  /// Ends the database's part in the container: no wake-ups, no part in its suspension.
  func end() {
    busyWakeups.cancel()
    suspensionHandlers.cancel()
    suspension.leave()
  }

  /// Waits until every access of the pool that was running when the suspension began has ended
  /// (and with it its locks): a barrier waits for the writer and every reader.
  static func waitForAccesses(in pool: DatabasePool) {
    try? pool.barrierWriteWithoutTransaction { _ in }
  }
}

extension SharedDatabase {
  /// How often the busy handler of ``Liaison/SharedContainer/sharedDatabases()`` waited in this process.
  package static let listingBusyWaits = TestCounter()

  /// The connection that lists a database: read-only (a listing changes nothing), and waiting
  /// when another connection holds a lock that keeps readers out (a writer in exclusive locking
  /// mode, a recovery) instead of failing with `SQLITE_BUSY` at once: for up to 30 s, retrying
  /// at least every 50 ms, like the databases' own busy handler.
  static var listingConfiguration: Configuration {
    var configuration = Configuration()
    configuration.readonly = true
    let doorbell = CommitDoorbell()
    configuration.busyMode = .callback { attempts in
      listingBusyWaits.increment()
      return doorbell.waitForCommit(attempts: attempts)
    }
    configuration.label = "Liaison.listing"
    return configuration
  }
}

/// A shared database as `liaison status` shows it.
public struct SharedDatabaseInfo: Sendable {
  /// The database's name.
  public let name: LiaisonName
  /// The database file.
  public let path: String
  /// The size of the file and its write-ahead log, in bytes.
  public let size: Int
  /// The migrations applied, in order: the schema version is the last.
  public let migrations: [String]
}

extension SharedContainer {
  /// Every shared database in the container, without opening it for writing or migrating it,
  /// and without creating anything.
  public func sharedDatabases() throws(LiaisonError) -> [SharedDatabaseInfo] {
    guard let folder = try existingPrivateFolder(.databases) else { return [] }
    var infos: [SharedDatabaseInfo] = []
    // Names of up to 128 characters make file names of up to 135.
    for name in try folder.names(suffix: ".sqlite") {
      let file = name.rawValue + ".sqlite"
      let path = folder.path(of: file)
      // Every file SQLite will open is checked first, without opening it (see SharedPool.open).
      var size = 0
      for suffix in ["", "-wal", "-shm"] {
        guard let info = try folder.inspectFile(file + suffix), suffix != "-shm" else { continue }
        size += Int(info.st_size)
      }
      let migrations: [String]
      do {
        let sqlitePath = try folder.trustedPath(of: file)
        migrations = try DatabaseQueue(path: sqlitePath, configuration: SharedDatabase.listingConfiguration).read {
          db in
          guard try db.tableExists("grdb_migrations") else { return [] }
          return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
        }
      } catch let error as LiaisonError {
        throw error
      } catch {
        throw StoreDatabase.translate(error, path: path)
      }
      infos.append(SharedDatabaseInfo(name: name, path: path, size: size, migrations: migrations))
    }
    return infos
  }
}
