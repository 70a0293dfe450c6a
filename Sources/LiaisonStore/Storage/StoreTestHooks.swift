import Liaison

/// Points in the store's code where the test peer can stop dead (a real `SIGKILL`), to show what
/// other processes see of a writer that died there. Empty in every other program: a lock and a
/// `nil` check per commit.
package enum StoreTestHooks {
  /// Runs after a commit of defaults or of a shared database, before its signal rings.
  package static let beforeRing = Locked<(@Sendable () -> Void)?>(nil)

  static func runBeforeRing() {
    beforeRing.withLock { $0 }?()
  }
}
