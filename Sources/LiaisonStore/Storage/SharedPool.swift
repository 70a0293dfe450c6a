import Foundation
import GRDB
import Liaison

/// Opening a GRDB `DatabasePool` that several processes share: the one way the store's own
/// databases and users' shared databases are opened.
enum SharedPool {
  /// The size the write-ahead log is cut back to after a checkpoint (`journal_size_limit`):
  /// without it, the `-wal` file stays as large as the largest transaction ever made it.
  static let walSizeLimit = 4 << 20

  /// Opens `file` in `folder` as a pool and migrates it, all while holding `held` (the database's
  /// opening lock, which the caller takes, waiting or not), so that concurrent openers neither
  /// wait inside SQLite nor run a migration twice. Releases it.
  ///
  /// SQLite opens its files by path, so it is given a path that no other user can redirect
  /// (``PrivateFolder/trustedPath(of:)``), and each file it will open is first checked the way
  /// Liaison checks its own files (the database is created 0600 if missing): a planted link or a
  /// foreign file is refused. They are checked without being opened, because closing a descriptor would
  /// drop the `fcntl` locks that SQLite holds on them when this process has them open already.
  /// A database that is missing or empty beside a write-ahead log that holds commits is refused:
  /// SQLite would start a new database and then discard the log. A database migrated by a newer
  /// program is refused **before** migrating, so that this program never runs its own migrations
  /// (or erases anything) over a schema it does not know. Once open, every commit must first check
  /// that the file is still there (see ``DeletedDatabaseGuard``): with `guardingCommits`, GRDB
  /// runs the check before each commit (for a database whose writes are the user's); without,
  /// the caller runs it before each of its commits (the store, whose writes are all Liaison's:
  /// a transaction observer makes GRDB do bookkeeping around every statement).
  ///
  /// `check` runs before the pool opens the database (given its path), and `prepare` after the
  /// migrations (the store checks, then keeps, the count of its commits: ``CommitRecord``).
  ///
  /// With no lock held (`held` nil: another process writes, and the caller opens beside it
  /// rather than wait), nothing is created or migrated: a database that is missing, or whose
  /// migrations have not all run, or that `prepare` finds not set up (`false`), is not opened,
  /// and this returns `nil` (the caller then waits for the lock).
  ///
  /// - Returns: the pool, the file's guard, and whether any migration ran.
  static func open(
    _ file: String, in folder: PrivateFolder, configuration: Configuration, migrator: DatabaseMigrator,
    guardingCommits: Bool, holding held: LockGuard?, check: (String) throws -> Void = { _ in },
    prepare: (DatabasePool) throws -> Bool = { _ in true }
  ) throws(LiaisonError) -> (pool: DatabasePool, deletionGuard: DeletedDatabaseGuard, migrationsRan: Bool)? {
    let path = folder.path(of: file)
    defer { held?.unlock() }
    var configuration = configuration
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA journal_size_limit = \(walSizeLimit)") }
    let sqlitePath = try folder.trustedPath(of: file)
    guard sqlitePath.utf8.count <= maximumPathBytes else {
      throw LiaisonError(
        .invalidArgument,
        "The database '\(path)' would be opened at a path of \(sqlitePath.utf8.count) bytes, and SQLite opens files "
          + "by paths of at most \(maximumPathBytes) bytes (512 with the suffix of its journal). Use a container at "
          + "a path \(sqlitePath.utf8.count - maximumPathBytes) bytes shorter, or more.",
        path: path)
    }
    // Under the lock: another opener creates the database, and its first log, only while holding it.
    let database = try folder.inspectFile(file)
    let log = try folder.inspectFile(file + "-wal")
    _ = try folder.inspectFile(file + "-shm")
    if let log, log.st_size > 0, (database?.st_size ?? 0) == 0 {
      throw LiaisonError(
        .corruptFile,
        "The database '\(path)' is \(database == nil ? "missing" : "empty") but its write-ahead log '\(path)-wal' "
          + "holds \(log.st_size) bytes of commits; SQLite would start a new database and discard them. Stop every "
          + "process that uses the container, then put the database file back beside its log, or move the -wal and "
          + "-shm files aside (keep them for recovery) to start a new database.",
        path: path)
    }
    // Without the lock, only a database that is there (opening a new one writes its header).
    if held == nil, (database?.st_size ?? 0) == 0 { return nil }
    if database == nil, let fd = try folder.openFile(file, create: true) { Syscall.close(fd) }
    do {
      try check(sqlitePath)
      let pool = try DatabasePool(path: sqlitePath, configuration: configuration)
      if try pool.read(migrator.hasBeenSuperseded) {
        throw LiaisonError(
          .incompatibleSchema,
          "The database '\(path)' was migrated by a newer version of this program, with migrations this version "
            + "does not know. Update the program; nothing was changed.",
          path: path)
      }
      var migrationsRan = false
      if held != nil {
        let before = try pool.read(migrator.appliedIdentifiers)
        try migrator.migrate(pool)
        migrationsRan = try pool.read(migrator.appliedIdentifiers) != before
      } else if try !pool.read(migrator.hasCompletedMigrations) {
        return nil
      }
      let deletionGuard = try DeletedDatabaseGuard(file, in: folder)
      guard try prepare(pool) else { return nil }
      if guardingCommits { pool.add(transactionObserver: deletionGuard, extent: .databaseLifetime) }
      return (pool, deletionGuard, migrationsRan)
    } catch let error as LiaisonError {
      throw error
    } catch let error as DatabaseError where configuration.readonly && error.resultCode == .SQLITE_CANTOPEN {
      // SQLite reads a database in WAL mode that it may not write only beside its -wal and -shm
      // files, which it cannot make here: the last process that had it open removed them.
      throw LiaisonError(
        .readOnly,
        "The database '\(path)' cannot be read: the container is read-only for this process, and SQLite needs the "
          + "database's -wal and -shm files beside it, which the last writer to close it removed. Open it once from "
          + "a process that may write the container (Liaison's store keeps them while any process has it open).",
        path: path, cause: error)
    } catch {
      throw StoreDatabase.translate(StoreDatabase.withSystemReason(error, openingAgain: sqlitePath), path: path)
    }
  }

  /// The longest path SQLite's Unix files take for a database (`MAX_PATHNAME`, 512 bytes, less
  /// the suffix of a journal, `-journal`).
  static let maximumPathBytes = 504
}

/// Refuses every commit once the database file has been deleted, or replaced by another file,
/// while this process has it open.
///
/// SQLite goes on writing into a deleted file without a word: every commit after the deletion
/// would vanish with the last process that has it open, and processes that open the path anew
/// would find another database. So before each commit this guard checks that the path still names
/// the file opened (`fstatat`, about a microsecond), and otherwise throws, which rolls back.
final class DeletedDatabaseGuard: TransactionObserver, Sendable {
  private let folder: PrivateFolder
  private let file: String
  private let device: UInt64
  private let inode: UInt64

  init(_ file: String, in folder: PrivateFolder) throws(LiaisonError) {
    self.folder = folder
    self.file = file
    guard let info = try folder.inspectFile(file) else { throw Self.deleted(folder.path(of: file), missing: true) }
    device = deviceNumber(info.st_dev)
    inode = UInt64(info.st_ino)
  }

  func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
  func databaseDidChange(with event: DatabaseEvent) {}
  func databaseDidCommit(_ db: Database) {}
  func databaseDidRollback(_ db: Database) {}

  func databaseWillCommit() throws { try check() }

  /// Throws when the path no longer names the file opened.
  func check() throws(LiaisonError) {
    var info = stat()
    let found = fstatat(folder.descriptor, file, &info, AT_SYMLINK_NOFOLLOW) == 0
    if found && deviceNumber(info.st_dev) == device && UInt64(info.st_ino) == inode { return }
    throw Self.deleted(folder.path(of: file), missing: !found)
  }

  private static func deleted(_ path: String, missing: Bool) -> LiaisonError {
    LiaisonError(
      .system,
      "The database '\(path)' was \(missing ? "deleted" : "replaced by another file") while this process was using "
        + "it, so this write was rolled back (SQLite would have written it into the old file, where it would be "
        + "lost). Stop every process that uses the container, then open it again.",
      errno: missing ? .init(rawValue: ENOENT) : nil, path: path)
  }
}
