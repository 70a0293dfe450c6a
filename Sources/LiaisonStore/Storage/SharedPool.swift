import Foundation
import GRDB
import Liaison

/// Opening a GRDB `DatabasePool` that several processes share: the one way the store's own
/// databases and users' shared databases are opened.
enum SharedPool {
  /// Opens `file` in `folder` as a pool and migrates it, all while holding `lock`, so that
  /// concurrent openers neither wait inside SQLite nor run a migration twice.
  ///
  /// SQLite follows symbolic links, so each file it will open is first checked with Liaison's own
  /// safe open (created 0600 if missing): a planted link or a foreign file is refused. A database
  /// migrated by a newer program is refused **before** migrating, so that this program never runs
  /// its own migrations (or erases anything) over a schema it does not know.
  ///
  /// - Returns: the pool, and whether any migration ran.
  static func open(
    _ file: String, in folder: PrivateFolder, configuration: Configuration, migrator: DatabaseMigrator,
    lock: ProcessLock
  ) throws(LiaisonError) -> (pool: DatabasePool, migrationsRan: Bool) {
    let path = folder.path(of: file)
    if let fd = try folder.openFile(file, create: true) { close(fd) }
    for suffix in ["-wal", "-shm"] {
      if let fd = try folder.openFile(file + suffix, create: false) { close(fd) }
    }
    let held = try lock.lock()
    defer { held.unlock() }
    do {
      let pool = try DatabasePool(path: path, configuration: configuration)
      if try pool.read(migrator.hasBeenSuperseded) {
        throw LiaisonError(
          .incompatibleSchema,
          "The database '\(path)' was migrated by a newer version of this program, with migrations this version "
            + "does not know. Update the program; nothing was changed.",
          path: path)
      }
      let before = try pool.read(migrator.appliedIdentifiers)
      try migrator.migrate(pool)
      return (pool, try pool.read(migrator.appliedIdentifiers) != before)
    } catch let error as LiaisonError {
      throw error
    } catch {
      throw StoreDatabase.translate(error, path: path)
    }
  }
}
