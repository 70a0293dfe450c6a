/// What an ``EventLoop`` registration waits for.
enum WatchTarget: Sendable {
  /// A change to a file of the container: any write or truncation, and any close of a
  /// descriptor that was open for writing (which includes a holder's exit). `doorbell` is the
  /// name writers ring on platforms where writes do not notify by themselves.
  case file(descriptor: CInt, doorbell: String)
  /// The exit of a process. Fires once, after the process's descriptors (and so its locks) are
  /// released; fires at once if the process does not exist.
  case processExit(Int32)
  /// A moment on the boot clock (``SystemClock/bootNanoseconds()``). Fires once.
  case deadline(UInt64)
}

/// A registration with the event loop, ended by ``cancel()`` or by its release.
///
/// A handler that the loop had already picked up when the registration ended may still run
/// once after `cancel()` returns; handlers must tolerate that (they hold their owner weakly, or
/// check whether it was cancelled).
final class EventRegistration: Sendable {
  private let onCancel: Locked<(@Sendable () -> Void)?>
  init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Locked(onCancel) }
  deinit { cancel() }

  /// Ends the registration. Calling it again does nothing.
  func cancel() {
    onCancel.withLock { $0.take() }?()
  }
}
