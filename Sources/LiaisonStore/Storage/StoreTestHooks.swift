import Liaison

/// Points in the store's code where the test peer can stop dead (a real `SIGKILL`), to show what
/// other processes see of a writer that died there. In debug builds only (``/Liaison/TestHook``).
package enum StoreTestHooks {
  /// Runs after a commit of defaults or of a shared database, before its signal rings.
  package static let beforeRing = TestHook()
}
