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
///   ``LiaisonError/Code/incompatibleSchema`` and left unchanged.
/// - **Cross-process observation.** After every commit in any process, the database's signal rings;
///   every other process then calls `notifyChanges(in: .fullDatabase)`, so its `ValueObservation`s
///   fetch again.
/// - **No sleeping on contention.** When another process holds SQLite's write lock, SQLite's busy
///   handler waits for that process's commit signal instead of sleeping 1, 2, 5 … 100 ms, and
///   retries at once when it arrives (at most 50 ms per wait; it gives up with `SQLITE_BUSY` only
///   after 30 s).
/// - ``SharedContainer/suspend()`` posts GRDB's `Database.suspendNotification` (and `resume()`
///   its `resumeNotification`) when the configuration observes them, as GRDB recommends on iOS.
public final class SharedDatabase: Sendable {
  /// The database's name.
  public let name: LiaisonName
  /// The GRDB pool: read, write and observe it as GRDB documents.
  public let pool: DatabasePool
  /// The database file, for messages and tools.
  public let path: String
  private let signal: Signal
  private let remoteCommits: SignalObservation
  private let doorbell: CommitDoorbell
  private let commitRinger: CommitRinger
  private let lifecycle: DatabaseLifecycle

  init(
    name: LiaisonName, container: SharedContainer, migrator: DatabaseMigrator, configuration: Configuration
  ) throws(LiaisonError) {
    self.name = name
    let folder = try container.privateFolder("databases")
    let file = name.rawValue + ".sqlite"
    path = folder.path(of: file)
    // SQLite follows symbolic links: check each file it opens with Liaison's own safe open first.
    if let fd = try folder.openFile(file, create: true) { close(fd) }
    for suffix in ["-wal", "-shm"] {
      if let fd = try folder.openFile(file + suffix, create: false) { close(fd) }
    }
    signal = try Signal(name: name, folder: try container.privateFolder("database-signals"))

    let doorbell = CommitDoorbell()
    self.doorbell = doorbell
    var configuration = configuration
    configuration.busyMode = .callback { attempts in doorbell.waitForCommit(attempts: attempts) }

    let lock = ProcessLock(name: try LiaisonName(name.rawValue + ".open"), folder: folder, container: container)
    let held = try lock.lock()
    defer { held.unlock() }
    do {
      pool = try DatabasePool(path: path, configuration: configuration)
      try migrator.migrate(pool)
      if try pool.read(migrator.hasBeenSuperseded) {
        throw LiaisonError(
          .incompatibleSchema,
          "The database '\(path)' was migrated by a newer version of this program, with migrations this version "
            + "does not know. Update the program; nothing was changed.",
          path: path)
      }
    } catch let error as LiaisonError {
      throw error
    } catch {
      throw StoreDatabase.translate(error, path: path)
    }

    let signal = signal
    let pool = pool
    let commitRinger = CommitRinger(signal: signal)
    self.commitRinger = commitRinger
    pool.add(transactionObserver: commitRinger, extent: .databaseLifetime)
    // Another process committed: wake this process's busy waiters, and refresh its observations.
    // Own commits need neither (observations see them already), so they are ignored.
    let refreshQueue = DispatchQueue(label: "Liaison.SharedDatabase.\(name)")
    remoteCommits = try signal.observe(on: refreshQueue, ignoringOwnPosts: true) { _ in
      // Observers fetch when a transaction commits, so the change is notified in one; that
      // commit only relays another process's and must not ring the other processes again.
      try? pool.write { db in
        commitRinger.relaying.withLock { $0 = true }
        try db.notifyChanges(in: .fullDatabase)
      }
      commitRinger.relaying.withLock { $0 = false }
    }
    let busyWakeups = try signal.observe(on: DispatchQueue.global(), ignoringOwnPosts: true) { _ in
      doorbell.ring()
    }
    lifecycle = DatabaseLifecycle(
      busyWakeups: busyWakeups, observesSuspension: configuration.observesSuspensionNotifications)
    let lifecycle = lifecycle
    lifecycle.keep(
      container.registerSuspensionHandlers(suspend: { lifecycle.suspend() }, resume: { lifecycle.resume() }))
  }

  /// The migrations applied to the database, in order.
  public func appliedMigrations() throws(LiaisonError) -> [String] {
    do {
      return try pool.read { db in
        guard try db.tableExists("grdb_migrations") else { return [] }
        return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
      }
    } catch {
      throw StoreDatabase.translate(error, path: path)
    }
  }
}

extension SharedContainer {
  /// The shared database called `name`, opened and migrated with `migrator` once across processes.
  ///
  /// - Parameters:
  ///   - configuration: GRDB's configuration for the pool. Its `busyMode` is replaced by Liaison's
  ///     (see ``SharedDatabase``); everything else is kept.
  /// - Throws: ``LiaisonError/Code/incompatibleSchema`` when a newer program migrated the
  ///   database; ``LiaisonError/Code/corruptFile`` when the file is damaged;
  ///   ``LiaisonError/Code/invalidName`` when `name` breaks the naming rule.
  public func database(
    _ name: String, migrator: DatabaseMigrator, configuration: Configuration = Configuration()
  ) throws(LiaisonError) -> SharedDatabase {
    try SharedDatabase(name: try LiaisonName(name), container: self, migrator: migrator, configuration: configuration)
  }
}

/// Rings the database's signal after every commit in this process, except the commits that only
/// relay another process's changes to this process's observers.
private final class CommitRinger: TransactionObserver, Sendable {
  let signal: Signal
  /// Set while a relaying transaction runs (on GRDB's writer queue, which runs one at a time).
  let relaying = Locked(false)
  init(signal: Signal) { self.signal = signal }
  func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
  func databaseDidChange(with event: DatabaseEvent) {}
  func databaseDidCommit(_ db: Database) {
    if !relaying.withLock({ $0 }) { try? signal.post() }
  }
  func databaseDidRollback(_ db: Database) {}
}

/// What SQLite's busy handler waits on: the commits of other processes.
final class CommitDoorbell: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  private let waiters = Locked(0)
  /// How long one wait lasts at most before SQLite retries anyway (a writer that does not ring).
  static let longestWait: DispatchTimeInterval = .milliseconds(50)
  /// How many waits before giving up with `SQLITE_BUSY`: 30 s of 50 ms waits.
  static let patience = 600

  /// Called by SQLite's busy handler with the number of times it was called before for this lock:
  /// waits for another process's commit (or 50 ms), then asks SQLite to retry.
  func waitForCommit(attempts: Int) -> Bool {
    guard attempts < Self.patience else { return false }
    waiters.withLock { $0 += 1 }
    if semaphore.wait(timeout: .now() + Self.longestWait) == .timedOut {
      waiters.withLock { $0 = max(0, $0 - 1) }
    }
    return true
  }

  /// Another process committed: wakes every waiting busy handler.
  func ring() {
    let count = waiters.withLock { waiters -> Int in
      defer { waiters = 0 }
      return waiters
    }
    for _ in 0..<count { semaphore.signal() }
  }
}

/// What a shared database keeps alive besides its pool: the busy handlers' wake-ups, and its
/// part in the container's suspend and resume.
final class DatabaseLifecycle: Sendable {
  private let busyWakeups: SignalObservation
  private let observesSuspension: Bool
  private let suspensionHandlers = Locked<AnyObject?>(nil)

  init(busyWakeups: SignalObservation, observesSuspension: Bool) {
    self.busyWakeups = busyWakeups
    self.observesSuspension = observesSuspension
  }

  func keep(_ handlers: AnyObject) { suspensionHandlers.withLock { $0 = handlers } }

  func suspend() {
    if observesSuspension { NotificationCenter.default.post(name: Database.suspendNotification, object: nil) }
  }

  func resume() {
    if observesSuspension { NotificationCenter.default.post(name: Database.resumeNotification, object: nil) }
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
  /// Every shared database in the container, without opening it for writing or migrating it.
  public func sharedDatabases() throws(LiaisonError) -> [SharedDatabaseInfo] {
    let folder = try privateFolder("databases")
    var infos: [SharedDatabaseInfo] = []
    for file in try folder.names() where file.rawValue.hasSuffix(".sqlite") {
      guard let name = try? LiaisonName(String(file.rawValue.dropLast(".sqlite".count))) else { continue }
      let path = folder.path(of: file.rawValue)
      var size = 0
      for suffix in ["", "-wal"] {
        guard let fd = try folder.openFile(file.rawValue + suffix, create: false) else { continue }
        var info = stat()
        if fstat(fd, &info) == 0 { size += Int(info.st_size) }
        close(fd)
      }
      let migrations: [String]
      do {
        migrations = try DatabaseQueue(path: path).read { db in
          guard try db.tableExists("grdb_migrations") else { return [] }
          return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
        }
      } catch {
        throw StoreDatabase.translate(error, path: path)
      }
      infos.append(SharedDatabaseInfo(name: name, path: path, size: size, migrations: migrations))
    }
    return infos
  }
}
