import Foundation
import GRDB
import Liaison

/// Keeps one store database's SQLite connections out of the container while it is suspended,
/// and owns its pool.
///
/// iOS terminates a suspended process that holds, or waits for, a file lock in a shared
/// container (`0xdead10cc`), and SQLite takes such locks for reads as well as writes. So every
/// access of the store passes through here: ``/Liaison/SharedContainer/suspend()`` refuses new
/// ones with ``/Liaison/LiaisonError/Code/suspended``, interrupts the ones in progress
/// (`sqlite3_interrupt`, and the busy handler gives up), waits until they have ended, and then
/// closes the pool. An open connection in WAL mode keeps two shared locks for as long as it is
/// open, idle or not (on the database file's lock bytes, and on its `-shm`); closed, it keeps
/// none. The first access after ``/Liaison/SharedContainer/resume()`` opens the pool again.
///
/// GRDB's own suspension (`Database.suspendNotification`) is process-wide, lets WAL reads through
/// and keeps the connections open; this one is scoped to the container and stops every access.
final class StoreSuspension: @unchecked Sendable {
  /// Guards the fields below; signalled when the last access ends.
  private let condition = NSCondition()
  /// Whether the container is suspended: changed under ``condition`` (with the count of
  /// accesses), read without it too, by SQLite's busy handler, which may run while this thread
  /// holds the condition to open the pool again (it is not recursive).
  private let suspended = Locked(false)
  private var accesses = 0
  /// The open pool; `nil` from the end of a suspension to the next access, which opens it.
  private var pool: DatabasePool?
  /// Opens the pool again, with the statements of the closed one forgotten.
  private let reopen: () throws(LiaisonError) -> DatabasePool
  /// Called before the pool closes, with every access of it excluded: the prepared statements
  /// are finalized (SQLite refuses to close a connection that has some).
  private let willClose: (DatabasePool) -> Void
  private let path: String

  init(
    path: String, pool: DatabasePool, willClose: @escaping (DatabasePool) -> Void,
    reopen: @escaping () throws(LiaisonError) -> DatabasePool
  ) {
    self.path = path
    self.pool = pool
    self.willClose = willClose
    self.reopen = reopen
  }

  /// Whether the container is suspended: SQLite's busy handler gives up at once then.
  var isSuspended: Bool { suspended.withLock { $0 } }

  /// Runs `body` on the pool as one access of the store, unless the container is suspended. The
  /// first access after a suspension opens the pool again.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/suspended`` while suspended; what opening the pool
  ///   again throws (the store was removed meanwhile, say); what `body` throws.
  func access<T>(_ body: (DatabasePool) throws(LiaisonError) -> T) throws(LiaisonError) -> T {
    condition.lock()
    if isSuspended {
      condition.unlock()
      throw suspendedError
    }
    if pool == nil {
      do throws(LiaisonError) {
        pool = try reopen()
      } catch {
        condition.unlock()
        throw error
      }
    }
    let pool = self.pool!
    accesses += 1
    condition.unlock()
    defer {
      condition.lock()
      accesses -= 1
      if accesses == 0 { condition.broadcast() }
      condition.unlock()
    }
    return try body(pool)
  }

  /// Throws ``/Liaison/LiaisonError/Code/suspended`` while the container is suspended.
  func check() throws(LiaisonError) {
    if isSuspended { throw suspendedError }
  }

  private var suspendedError: LiaisonError {
    LiaisonError(
      .suspended,
      "The container is suspended, so the store '\(path)' is not read or written (SQLite would lock files in "
        + "it). Call resume() first.")
  }

  /// Interrupts the statements running on the pool (`sqlite3_interrupt`): each fails with
  /// `SQLITE_INTERRUPT`, and SQLite rolls its transaction back.
  func interrupt() {
    condition.lock()
    let open = pool
    condition.unlock()
    open?.interrupt()
  }

  /// Refuses new accesses and interrupts those in progress.
  func suspend() {
    condition.lock()
    suspended.withLock { $0 = true }
    let running = accesses > 0 ? pool : nil
    condition.unlock()
    running?.interrupt()
  }

  /// Waits until no access is in progress, then closes the pool: this process then holds no
  /// lock on the store's files. A pool that will not close (it should not happen: every
  /// statement of the store is finalized first) is dropped all the same, which closes it once
  /// its last statement is gone.
  func finishSuspending() {
    condition.lock()
    while accesses > 0 { condition.wait() }
    let closing = pool
    pool = nil
    condition.unlock()
    guard let closing else { return }
    willClose(closing)
    try? closing.close()
  }

  func resume() {
    condition.lock()
    suspended.withLock { $0 = false }
    condition.unlock()
  }
}
