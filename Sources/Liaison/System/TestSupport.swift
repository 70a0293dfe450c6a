/// A count of an event that only the tests read (a wait inside SQLite, a relay that failed). It
/// counts in debug builds, which the tests are, and is nothing at all in release builds, which is
/// what ships.
package struct TestCounter: Sendable {
  #if DEBUG
    private let count = Locked(0)
  #endif

  package init() {}

  package func increment() {
    #if DEBUG
      count.withLock { $0 += 1 }
    #endif
  }

  /// The count so far; 0 in a release build.
  package var value: Int {
    #if DEBUG
      count.withLock { $0 }
    #else
      0
    #endif
  }
}

/// A point in the library where a test can act, such as stopping the process dead with a real
/// `SIGKILL` to show what other processes see of a writer that died there. Debug builds only: in a
/// release build, setting it does nothing and running it costs nothing.
package struct TestHook: Sendable {
  #if DEBUG
    private let action = Locked<(@Sendable () -> Void)?>(nil)
  #endif

  package init() {}

  /// Runs `action` at this point from now on (`nil`: nothing).
  package func set(_ action: (@Sendable () -> Void)?) {
    #if DEBUG
      self.action.withLock { $0 = action }
    #endif
  }

  package func run() {
    #if DEBUG
      action.withLock { $0 }?()
    #endif
  }
}
