import Foundation
import Liaison

/// Keeps one store database's SQLite connections out of the container while it is suspended.
///
/// iOS terminates a suspended process that holds, or waits for, a file lock in a shared
/// container (`0xdead10cc`), and SQLite takes such locks for reads as well as writes. So every
/// access of the store passes through here: ``/Liaison/SharedContainer/suspend()`` refuses new ones with
/// ``/Liaison/LiaisonError/Code/suspended``, interrupts the ones in progress (`sqlite3_interrupt`, and the
/// busy handler gives up) and waits until they have ended, hence released their locks.
///
/// GRDB's own suspension (`Database.suspendNotification`) is process-wide and lets WAL reads
/// through; this one is scoped to the container and stops every access.
final class StoreSuspension: @unchecked Sendable {
  /// Guards `suspended` and `accesses`; signalled when the last access ends.
  private let condition = NSCondition()
  private var suspended = false
  private var accesses = 0
  private let path: String

  init(path: String) {
    self.path = path
  }

  /// Whether the container is suspended: SQLite's busy handler gives up at once then.
  var isSuspended: Bool {
    condition.lock()
    defer { condition.unlock() }
    return suspended
  }

  /// Runs `body` as one access of the store, unless the container is suspended.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/suspended`` while suspended, or what `body` throws.
  func access<T>(_ body: () throws(LiaisonError) -> T) throws(LiaisonError) -> T {
    condition.lock()
    if suspended {
      condition.unlock()
      throw suspendedError
    }
    accesses += 1
    condition.unlock()
    defer {
      condition.lock()
      accesses -= 1
      if accesses == 0 { condition.broadcast() }
      condition.unlock()
    }
    return try body()
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

  /// Refuses new accesses and interrupts those in progress with `interrupt`.
  func suspend(interrupt: () -> Void) {
    condition.lock()
    suspended = true
    let busy = accesses > 0
    condition.unlock()
    if busy { interrupt() }
  }

  /// Waits until no access is in progress.
  func waitUntilIdle() {
    condition.lock()
    while accesses > 0 { condition.wait() }
    condition.unlock()
  }

  func resume() {
    condition.lock()
    suspended = false
    condition.unlock()
  }
}
