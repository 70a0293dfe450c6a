import Foundation
import GRDB
import GRDBSQLite
import Liaison
import SystemPackage

/// One SQLite database of the store, in the container's `.liaison/store` folder, shared by every
/// process: a GRDB `DatabasePool` (WAL: readers never wait for the writer) whose writes are
/// serialised across processes by a ``/Liaison/ProcessLock`` taken before SQLite's `BEGIN IMMEDIATE`.
///
/// The lock turns contention into an immediate kernel hand-off: SQLite's busy handler, which
/// sleeps 1, 2, 5 … 100 ms between attempts, is never what a writer of Liaison's waits in. (It
/// stays as a fallback against writers that do not take the lock, such as the `sqlite3` shell.)
final class StoreDatabase: Sendable {
  let path: String
  let folder: PrivateFolder
  let generations: GenerationCounters
  /// Whether the store was opened read-only, in a container that this process may not write:
  /// every write throws ``/Liaison/LiaisonError/Code/readOnly``.
  var isReadOnly: Bool { !generations.isWritable }
  /// Whether each commit is recorded in ``generations`` (``CommitRecord``).
  private let recordsCommits: Bool
  /// The hot paths' statements, prepared once per connection of the pool.
  let statements: PreparedStatements
  /// Checked before each commit: no write into a file that was deleted or replaced.
  private let deletionGuard: DeletedDatabaseGuard
  private let writeLock: ProcessLock
  private let suspension: StoreSuspension
  /// Keeps the suspension's handlers registered with the container.
  private let suspensionHandlers: SuspensionHandlers

  private init(
    deletionGuard: DeletedDatabaseGuard, path: String, folder: PrivateFolder, generations: GenerationCounters,
    recordsCommits: Bool, statements: PreparedStatements, writeLock: ProcessLock, suspension: StoreSuspension,
    container: SharedContainer
  ) {
    self.deletionGuard = deletionGuard
    self.path = path
    self.folder = folder
    self.generations = generations
    self.recordsCommits = recordsCommits
    self.statements = statements
    self.writeLock = writeLock
    self.suspension = suspension
    suspensionHandlers = container.registerSuspensionHandlers(
      suspend: suspension.suspend, finish: suspension.finishSuspending, resume: suspension.resume)
  }

  private static let registry = Locked<[String: StoreDatabase]>([:])

  /// How often SQLite's busy handler has run in this process: a wait inside SQLite for another
  /// connection's lock.
  static let busyWaits = TestCounter()

  /// Set (non-nil) on a thread while it is inside ``write(slot:_:)``, to refuse a nested write
  /// (which would wait for its own lock forever) with a clear error: a thread-specific value,
  /// read in a few instructions.
  private static let writingThread: pthread_key_t = {
    var key = pthread_key_t()
    precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key is left for the store")
    return key
  }()

  /// The database `name` of `container`, opened once per process and migrated once across
  /// processes, under the store's lock. A store already set up opens at once while another
  /// process holds the lock (a write, however long, or a writer stopped by a debugger or
  /// `SIGSTOP`): reading never waits for a writer, and writing waits only when it writes. Only a
  /// store to create or migrate waits for the lock (at most `timeout`).
  @available(*, noasync)
  static func shared(
    _ container: SharedContainer, name: String, migrator: DatabaseMigrator, timeout: Duration? = nil
  ) throws(LiaisonError) -> StoreDatabase {
    let (folder, lock) = try opening(container, name: name)
    if let open = registered(folder, name: name) { return open }
    if let open = try registerWithoutWaiting(container, folder: folder, name: name, migrator: migrator, lock: lock) {
      return open
    }
    let held: LockGuard
    do {
      held = try lock.lock(timeout: timeout)
    } catch let error where error.code == .timedOut {
      throw openingTimedOut(folder.path(of: name + ".sqlite"), timeout)
    }
    return try register(container, folder: folder, name: name, migrator: migrator, lock: lock, holding: held)!
  }

  /// The database `name` of `container`, waiting for the store's lock (when it must) without
  /// blocking a thread of the cooperative pool.
  static func shared(
    _ container: SharedContainer, name: String, migrator: DatabaseMigrator, timeout: Duration? = nil
  ) async throws(LiaisonError) -> StoreDatabase {
    let (folder, lock) = try opening(container, name: name)
    if let open = registered(folder, name: name) { return open }
    if let open = try registerWithoutWaiting(container, folder: folder, name: name, migrator: migrator, lock: lock) {
      return open
    }
    let held: LockGuard
    do {
      held = try await lock.lock(timeout: timeout)
    } catch let error where error.code == .timedOut {
      throw openingTimedOut(folder.path(of: name + ".sqlite"), timeout)
    }
    return try register(container, folder: folder, name: name, migrator: migrator, lock: lock, holding: held)!
  }

  /// The database opened without waiting: under the lock when it is free, else beside the
  /// process that holds it, if the store is set up; `nil` when it must wait for the lock.
  ///
  /// In a container that this process may not write (its lock cannot be opened), the store is
  /// opened read-only, as it is: reads work, and every write throws
  /// ``/Liaison/LiaisonError/Code/readOnly`` (its lock's).
  private static func registerWithoutWaiting(
    _ container: SharedContainer, folder: PrivateFolder, name: String, migrator: DatabaseMigrator, lock: ProcessLock
  ) throws(LiaisonError) -> StoreDatabase? {
    let held: LockGuard?
    do {
      held = try lock.tryLock()
    } catch let error where error.code == .readOnly {
      let path = folder.path(of: name + ".sqlite")
      guard
        let database = try register(
          container, folder: folder, name: name, migrator: migrator, lock: lock, holding: nil, readOnly: true)
      else {
        let state = try folder.inspectFile(name + ".sqlite") == nil ? "does not exist" : "is not set up"
        throw LiaisonError(
          .readOnly,
          "The store '\(path)' \(state) yet, and the container is read-only for this process, so it cannot be made. "
            + "Nothing has been stored in it: a process that may write the container makes it at its first write.",
          errno: error.errno, path: path)
      }
      return database
    }
    return try register(container, folder: folder, name: name, migrator: migrator, lock: lock, holding: held)
  }

  private static func opening(
    _ container: SharedContainer, name: String
  ) throws(LiaisonError) -> (PrivateFolder, ProcessLock) {
    let folder = try container.privateFolder(.store)
    return (folder, ProcessLock(name: try LiaisonName(name + ".write"), folder: folder, container: container))
  }

  /// The database already open in this process. A folder deleted and made again can reuse the
  /// inode, hence the key: such an entry is stale.
  private static func registered(_ folder: PrivateFolder, name: String) -> StoreDatabase? {
    registry.withLock { registry in
      registry[folder.identity + "/" + name].flatMap { $0.folder.isDeleted ? nil : $0 }
    }
  }

  /// Opens the database holding `held` (released here), unless another thread of this process
  /// opened it meanwhile. Without the lock (`held` nil), opens only a store set up already;
  /// `nil` otherwise.
  private static func register(
    _ container: SharedContainer, folder: PrivateFolder, name: String, migrator: DatabaseMigrator,
    lock writeLock: ProcessLock, holding held: LockGuard?, readOnly: Bool = false
  ) throws(LiaisonError) -> StoreDatabase? {
    try registry.withLock { registry throws(LiaisonError) in
      let key = folder.identity + "/" + name
      if let open = registry[key], !open.folder.isDeleted {
        held?.unlock()
        return open
      }
      let database = try open(
        container, folder: folder, name: name, migrator: migrator, writeLock: writeLock, holding: held,
        readOnly: readOnly)
      registry[key] = database
      return database
    }
  }

  private static func openingTimedOut(_ path: String, _ timeout: Duration?) -> LiaisonError {
    LiaisonError(
      .timedOut,
      "Timed out after \(timeout.map { "\($0)" } ?? "waiting") opening the store '\(path)': another process's write "
        + "or migration holds it (a process stopped while writing, by a debugger or SIGSTOP). Try again later, or "
        + "wait longer.",
      path: path)
  }

  /// The database `name` of `container` if its file exists (for listings, which must not create
  /// a store); `nil` otherwise. The file is checked without being opened: closing a descriptor on
  /// it would drop the `fcntl` locks SQLite holds on it in this process.
  static func existing(
    _ container: SharedContainer, name: String, migrator: DatabaseMigrator
  ) throws(LiaisonError) -> StoreDatabase? {
    guard try container.privateFolder(.store).inspectFile(name + ".sqlite") != nil else { return nil }
    return try shared(container, name: name, migrator: migrator)
  }

  private static func open(
    _ container: SharedContainer, folder: PrivateFolder, name: String, migrator: DatabaseMigrator,
    writeLock: ProcessLock, holding held: LockGuard?, readOnly: Bool
  ) throws(LiaisonError) -> StoreDatabase? {
    let path = folder.path(of: name + ".sqlite")
    // Read-only, only a store that is there: its counters file may not be made either.
    if readOnly, try folder.inspectFile(name + ".sqlite") == nil { return nil }
    // Set once the pool is open: the busy handler gives up while the container is suspended.
    let suspensionOnceOpen = Locked<StoreSuspension?>(nil)
    var configuration = Configuration()
    // Liaison's writers never contend inside SQLite (the process lock serialises them). Writers
    // that skip the lock (the sqlite3 shell) still get waited for, up to 10 s, and each wait
    // is counted: the tests check that Liaison's own writers cause none. A suspended container
    // waits for no lock.
    configuration.busyMode = .callback { attempts in
      if suspensionOnceOpen.withLock({ $0?.isSuspended ?? false }) { return false }
      StoreDatabase.busyWaits.increment()
      usleep(1_000)  // the kernel's clock: SQLite's busy handler runs on the blocked connection's thread
      return attempts < 10_000
    }
    // WAL with synchronous=NORMAL: a commit survives any crash of the process (or of every
    // process); only a power loss or kernel crash can take back the last commits. Each commit
    // then costs no fsync.
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
    configuration.label = "Liaison.\(name)"
    // Readers are kept for the pool's life (GRDB would close idle ones on a memory warning): the
    // prepared statements (``statements``) are kept per connection.
    configuration.persistentReadOnlyConnections = true
    // An app that posts GRDB's `Database.suspendNotification` itself, as GRDB documents for iOS,
    // suspends the store's databases too. `SharedContainer.suspend()` does more (StoreSuspension).
    configuration.observesSuspensionNotifications = true
    // In a container this process may not write: SQLite opens the database for reading
    // (SQLITE_OPEN_READONLY), and reads a write-ahead log it cannot write as it is (SQLite 3.22
    // and later, given the -wal and -shm files, which the writers' open databases keep).
    configuration.readonly = readOnly
    let generations: GenerationCounters
    do {
      generations = try GenerationCounters(folder: folder, name: name + ".generations", container: container)
    } catch {
      held?.unlock()
      throw error
    }
    var recordsCommits = false
    guard
      let (pool, deletionGuard, _) = try SharedPool.open(
        name + ".sqlite", in: folder, configuration: configuration, migrator: migrator, guardingCommits: false,
        holding: held,
        check: { sqlitePath in try CommitRecord.check(sqlitePath, counters: generations, path: path) },
        prepare: { pool in
          guard let records = try CommitRecord.begin(pool, counters: generations, holdingTheLock: held != nil)
          else { return false }
          recordsCommits = records
          return true
        })
    else { return nil }
    let statements = PreparedStatements()
    // Opened again after a suspension closed it, without the lock: the store is set up, and the
    // same checks run (its log may have been damaged meanwhile).
    let suspension = StoreSuspension(
      path: path, pool: pool,
      willClose: { pool in try? pool.barrierWriteWithoutTransaction { _ in statements.finalizeAll() } },
      reopen: { () throws(LiaisonError) -> DatabasePool in
        guard
          let (pool, _, _) = try SharedPool.open(
            name + ".sqlite", in: folder, configuration: configuration, migrator: migrator, guardingCommits: false,
            holding: nil,
            check: { sqlitePath in try CommitRecord.check(sqlitePath, counters: generations, path: path) },
            prepare: { pool in try CommitRecord.begin(pool, counters: generations, holdingTheLock: false) != nil })
        else {
          throw LiaisonError(
            .system,
            "The store '\(path)' was removed or replaced while the container was suspended, so it is not opened "
              + "again. Stop every process that uses the container, then open it again.",
            path: path)
        }
        return pool
      })
    suspensionOnceOpen.withLock { $0 = suspension }
    return StoreDatabase(
      deletionGuard: deletionGuard, path: path, folder: folder, generations: generations,
      recordsCommits: recordsCommits, statements: statements, writeLock: writeLock, suspension: suspension,
      container: container)
  }

  /// Runs `body` in a write transaction, holding the store's process lock, with the counter
  /// `slot` kept as a sequence lock: odd from before the transaction until after it ends, so
  /// that a reader never trusts its cache while a write is in flight — nor after a writer died in
  /// the middle of one (the next writer makes it even again).
  ///
  /// Waits for the lock (another process's write) at most `timeout`, blocking the calling
  /// thread; the `async` twin waits off the cooperative pool.
  ///
  /// `BEGIN` and `COMMIT` are GRDB statements held per connection (``PreparedStatements``), not
  /// GRDB's `inTransaction`, which compiles both at each call; so GRDB's own guard is off: after
  /// an error SQLite may roll the whole transaction back by itself, and a statement run after
  /// that would be committed alone. A `body` must therefore let every database error through (as
  /// Liaison's do), or check `db.isInsideTransaction` before its next statement, as
  /// ``DefaultsTransaction`` does for the bodies that users write. Before `COMMIT`, the file is
  /// checked to be the one opened (``DeletedDatabaseGuard``).
  ///
  /// GRDB's own suspension (`Database.suspendNotification`) refuses the `BEGIN`; the hot paths'
  /// statements are stepped directly, so a notification that comes after the `BEGIN` lets that
  /// one transaction finish (microseconds, or the length of a `transaction` body), where GRDB
  /// would have refused its next statement. ``/Liaison/SharedContainer/suspend()`` interrupts
  /// it, as it does every statement.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when another process holds the lock longer than
  ///   `timeout`; ``/Liaison/LiaisonError/Code/invalidArgument`` when called from inside another write of
  ///   this store on the same thread (it would wait for its own lock forever);
  ///   ``/Liaison/LiaisonError/Code/suspended`` while the container is suspended (see ``StoreSuspension``).
  @available(*, noasync)
  func write<T>(
    slot: Int? = nil, timeout: Duration? = nil, ring: ((_ waiting: Bool) -> Bool)? = nil,
    _ body: (Database) throws -> T
  ) throws(LiaisonError) -> T {
    try suspension.access { pool throws(LiaisonError) -> T in
      try checkNotNested()
      let held: LockGuard
      do throws(LiaisonError) {
        held = try writeLock.lock(timeout: timeout)
      } catch let error where error.code == .timedOut {
        throw timedOut(timeout)
      }
      return try writeHolding(held, on: pool, slot: slot, ring: ring, body)
    }
  }

  /// Runs `body` in a write transaction like the blocking ``write(slot:timeout:_:)``, but waits
  /// for the store's process lock on a thread of its own, never on one of the cooperative pool;
  /// `body` runs once the lock is held (a write of a few microseconds that waits for nobody).
  ///
  /// - Throws: what the blocking form throws, and ``/Liaison/LiaisonError/Code/cancelled`` when the
  ///   task is cancelled while waiting.
  func write<T>(
    slot: Int? = nil, timeout: Duration? = nil, ring: ((_ waiting: Bool) -> Bool)? = nil,
    isolation: isolated (any Actor)? = #isolation, _ body: (Database) throws -> T
  ) async throws(LiaisonError) -> T {
    try suspension.check()
    let held: LockGuard
    do {
      held = try await writeLock.lock(timeout: timeout)
    } catch let error where error.code == .timedOut {
      throw timedOut(timeout)
    }
    return try suspension.access { pool throws(LiaisonError) -> T in
      try checkNotNested()
      return try writeHolding(held, on: pool, slot: slot, ring: ring, body)
    }
  }

  private func timedOut(_ timeout: Duration?) -> LiaisonError {
    LiaisonError(
      .timedOut,
      "Timed out after \(timeout.map { "\($0)" } ?? "waiting") for another process's write of the store '\(path)' "
        + "to end (a process stopped while writing, by a debugger or SIGSTOP, holds it). Nothing was written: try "
        + "again later, wait longer, or use the async form, which waits without blocking a thread.",
      path: path)
  }

  private func checkNotNested() throws(LiaisonError) {
    if pthread_getspecific(Self.writingThread) != nil {
      throw LiaisonError(
        .invalidArgument,
        "A write to the store '\(path)' was started inside another write on the same thread (for example "
          + "`set` inside `transaction` or `update`). Inside a transaction, use the transaction's own get and set.")
    }
  }

  /// The write itself, once `held` holds the store's process lock; releases it. After a commit,
  /// and the counter's last move, runs `ring(false)` before the lock is released: the release of
  /// the lock then says that the write has rung, or that its writer died (see
  /// ``SharedDefaults/changes()``). A ring that would wait for another poster (`false`) is made
  /// after the release instead, waiting: a stuck poster never holds the store's lock too. A write
  /// that rolls back does not ring.
  private func writeHolding<T>(
    _ held: LockGuard, on pool: DatabasePool, slot: Int?, ring: ((_ waiting: Bool) -> Bool)?,
    _ body: (Database) throws -> T
  ) throws(LiaisonError) -> T {
    var ringsAfterUnlock = false
    defer { if ringsAfterUnlock { _ = ring?(true) } }  // runs after the unlock below
    defer { held.unlock() }
    pthread_setspecific(Self.writingThread, UnsafeRawPointer(bitPattern: 1))
    defer { pthread_setspecific(Self.writingThread, nil) }
    var committed = false
    defer {  // after the counter's move below, before the unlock above
      if committed, let ring, !ring(false) { ringsAfterUnlock = true }
    }
    if let slot {
      if generations.load(slot) & 1 == 1 { generations.increment(slot) }  // a writer died mid-write
      generations.increment(slot)  // odd: in flight
    }
    defer { if let slot { generations.increment(slot) } }  // even: committed or rolled back
    // GRDB's generic write is not specialized: what it returns is the commit's count, a UInt64,
    // and `body`'s result is kept here, where `T` is known (a tuple of `T` went through the
    // runtime's tuple witnesses, a few hundred instructions per write).
    var result: T?
    let commits = try translatingErrors {
      try pool.writeWithoutTransaction { db -> UInt64 in
        // BEGIN and COMMIT as statements held per connection: GRDB's `inTransaction` compiles both at
        // each call.
        try statements.held(Self.begin, in: db).execute()
        // The system's error number is read before the rollback, which may clear it.
        do {
          return try Self.withSystemErrno(db) { () -> UInt64 in
            let value = try body(db)
            guard db.isInsideTransaction else {
              // SQLite rolled back by itself after an error that `body` caught and did not pass on.
              throw DatabaseError(resultCode: .SQLITE_ABORT, message: "the transaction was rolled back after an error")
            }
            let commits = generations.commitRecord.commits &+ 1
            try statements.run(CommitRecord.increment, in: db) {
              $0.bind(1, integer: Int64(bitPattern: commits))
              try $0.execute()
            }
            try deletionGuard.check()
            try statements.held(Self.commit, in: db).execute()
            result = value
            return commits
          }
        } catch {
          try? db.rollback()
          throw error
        }
      }
    }
    committed = true
    if recordsCommits { generations.commitRecord.commits = commits }
    return result!
  }

  /// Interrupts the statements running on the store's connections, as ``/Liaison/SharedContainer/suspend()``
  /// does: each fails, and its transaction rolls back.
  func interrupt() { suspension.interrupt() }

  private static let begin = PreparedStatements.Query("BEGIN IMMEDIATE TRANSACTION")
  private static let commit = PreparedStatements.Query("COMMIT TRANSACTION")

  /// The name of the write lock's file in ``folder``: every writing process keeps a descriptor
  /// open on it, for writing, for as long as it runs.
  var writeLockFile: String { writeLock.name.rawValue }

  /// Runs `body` in a read transaction; never waits for writers.
  func read<T>(_ body: (Database) throws -> T) throws(LiaisonError) -> T {
    try suspension.access { pool throws(LiaisonError) -> T in
      try translatingErrors { try pool.read { db in try Self.withSystemErrno(db) { try body(db) } } }
    }
  }

  /// Runs `body`, which must run **one** `SELECT`, outside a transaction: the statement alone
  /// sees one snapshot of the database, so it needs no read transaction (nor GRDB's switch to
  /// read-only mode around it), which halves the cost of a small read.
  func readOneStatement<T>(_ body: (Database) throws -> T) throws(LiaisonError) -> T {
    try suspension.access { pool throws(LiaisonError) -> T in
      try translatingErrors { try pool.unsafeRead { db in try Self.withSystemErrno(db) { try body(db) } } }
    }
  }

  /// A database error that the system caused (SQLite's I/O, space and opening errors), with the
  /// system's error number (`sqlite3_system_errno`): SQLite's own message says only "disk I/O
  /// error" for a quota used up, a device gone or a file system turned read-only.
  struct SystemFailure: Error {
    let error: DatabaseError
    let errno: Errno
  }

  /// Runs `body` on `db`, and gives a database error that the system caused its error number
  /// (``SystemFailure``), read on the connection before anything else runs on it.
  private static func withSystemErrno<T>(_ db: Database, _ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch let error as DatabaseError {
      let systemCaused: [ResultCode] = [.SQLITE_IOERR, .SQLITE_FULL, .SQLITE_CANTOPEN, .SQLITE_READONLY]
      guard systemCaused.contains(error.resultCode), let connection = db.sqliteConnection else { throw error }
      let code = lastSystemErrno(connection)
      throw code == 0 ? error : SystemFailure(error: error, errno: Errno(rawValue: code))
    }
  }

  /// `error`, an opening's, with the system's reason when the system caused it: GRDB gives no
  /// connection once its opening failed, so the opening is made again on a connection of this
  /// one's (which reads, and writes nothing), and its error number read there.
  static func withSystemReason(_ error: any Error, openingAgain sqlitePath: String) -> any Error {
    guard let failure = error as? DatabaseError,
      [ResultCode.SQLITE_IOERR, .SQLITE_FULL, .SQLITE_CANTOPEN, .SQLITE_READONLY].contains(failure.resultCode)
    else { return error }
    var connection: OpaquePointer?
    defer { sqlite3_close_v2(connection) }
    if sqlite3_open_v2(sqlitePath, &connection, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK {
      _ = sqlite3_exec(connection, "SELECT count(*) FROM sqlite_schema", nil, nil, nil)
    }
    let code = connection.map(lastSystemErrno) ?? 0
    return code == 0 ? error : SystemFailure(error: failure, errno: Errno(rawValue: code))
  }

  /// The system's error number of the connection's last failed I/O: SQLite keeps it for a failed
  /// statement (`sqlite3_system_errno`), and each file keeps its own, which is where a failed
  /// commit's is (the log's, or the database's); 0 when none is known.
  private static func lastSystemErrno(_ connection: OpaquePointer) -> CInt {
    let code = sqlite3_system_errno(connection)
    if code != 0 { return code }
    var value: CInt = 0
    var log: UnsafeMutablePointer<sqlite3_file>?
    if sqlite3_file_control(connection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &log) == SQLITE_OK, let log,
      let control = log.pointee.pMethods?.pointee.xFileControl,
      control(log, SQLITE_FCNTL_LAST_ERRNO, &value) == SQLITE_OK,
      value != 0
    {
      return value
    }
    return sqlite3_file_control(connection, "main", SQLITE_FCNTL_LAST_ERRNO, &value) == SQLITE_OK ? value : 0
  }

  /// Runs `body`, passing a ``/Liaison/LiaisonError`` on as it is and turning any other error into one
  /// (see ``translate(_:path:)``).
  private func translatingErrors<T>(_ body: () throws -> T) throws(LiaisonError) -> T {
    do {
      return try body()
    } catch let error as LiaisonError {
      throw error
    } catch {
      throw Self.translate(error, path: path)
    }
  }

  /// A GRDB or SQLite error as a ``/Liaison/LiaisonError`` that names the file and says what to do, and
  /// keeps the GRDB error (with SQLite's result code) as its ``/Liaison/LiaisonError/cause``.
  static func translate(_ error: any Error, path: String) -> LiaisonError {
    if let failure = error as? SystemFailure {
      if let refusal = LiaisonError.protectedDataRefusal(failure.errno, sqliteFile: path, cause: failure.error) {
        return refusal  // on Apple platforms, a file of a class unreadable while the device is locked
      }
      // SQLite's message ("disk I/O error"), the system's reason, and what to do about it.
      return LiaisonError(
        .system,
        "The store '\(path)' failed: \(failure.error.message ?? "\(failure.error.resultCode)") (\(failure.errno))."
          + LiaisonError.advice(for: failure.errno), errno: failure.errno, path: path, cause: failure.error)
    }
    guard let error = error as? DatabaseError else {
      return LiaisonError(.system, "The store '\(path)' failed: \(error)", path: path, cause: error)
    }
    switch error.resultCode {
    case .SQLITE_NOTADB, .SQLITE_CORRUPT:
      return LiaisonError(
        .corruptFile,
        "The store '\(path)' is not a readable SQLite database (\(error.message ?? "damaged")). Liaison will not "
          + "replace it: stop every process that uses the container, then move it (and its -wal and -shm files) "
          + "aside to keep the data for recovery; a new store is created on next use.",
        path: path, cause: error)
    case .SQLITE_FULL:
      return LiaisonError(
        .system, "The disk holding the store '\(path)' is full; free some space.", path: path, cause: error)
    case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
      // SQLite says "unable to open database file" whatever the cause, after closing what it
      // had opened. A connection opens up to 8 files at once (the database, its -wal and -shm,
      // a journal, the folder, /dev/urandom...): short of that many descriptors, the
      // permissions are not what to check.
      if error.resultCode == .SQLITE_CANTOPEN, let shortage = LiaisonError.descriptorShortage(count: 8) {
        return LiaisonError(
          .system, "The store '\(path)' cannot be opened. " + LiaisonError.descriptorAdvice(shortage)!,
          errno: shortage, path: path, cause: error)
      }
      return LiaisonError(
        .system,
        "The store '\(path)' cannot be written (\(error.message ?? "\(error.resultCode)")). Check the "
          + "permissions of the container folder.", path: path, cause: error)
    case .SQLITE_INTERRUPT:
      // `suspend()` interrupts the statements in progress (StoreSuspension).
      return LiaisonError(
        .suspended,
        "The access to '\(path)' was interrupted because the container (or the database) was suspended; nothing was "
          + "written. Call resume() first, then try again.", path: path, cause: error)
    case .SQLITE_ABORT where error.message == "Database is suspended":
      // GRDB's own suspension (`Database.suspendNotification`).
      return LiaisonError(
        .suspended,
        "The database '\(path)' is suspended (GRDB's Database.suspendNotification was posted); nothing was written. "
          + "Post Database.resumeNotification, or call resume(), first.", path: path, cause: error)
    default:
      return LiaisonError(
        .system, "The store '\(path)' failed: \(error.message ?? "\(error.resultCode)").", path: path, cause: error)
    }
  }
}

extension LiaisonError {
  /// The GRDB error beneath this one, with SQLite's result code (`resultCode`,
  /// `extendedResultCode`), when a store or shared database failed.
  public var databaseError: DatabaseError? { cause as? DatabaseError }
}

extension StoreDatabase {
  /// The signal `name` of a part of this store (a domain, a mailbox), in the container's folder
  /// `folder`, which its writes ring; `nil` in a store opened read-only when no writer has opened
  /// the part yet (it reads as empty). Read once here: a damaged signal file is an error that
  /// names it now, not a silent end of the part's notifications (writes ring without throwing,
  /// having committed).
  func signal(
    _ name: LiaisonName, in folder: ContainerLayout.Folder, container: SharedContainer
  ) throws(LiaisonError) -> Signal? {
    let signal: Signal
    do {
      signal = try Signal(name: name, folder: try container.privateFolder(folder), container: container)
    } catch let error where error.code == .readOnly && isReadOnly {
      return nil
    }
    _ = try signal.state
    return signal
  }
}
