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

/// A registration with the event loop; the handler stops being called once it is cancelled
/// or released.
final class EventRegistration: Sendable {
  private let onCancel: @Sendable () -> Void
  init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = onCancel }
  deinit { onCancel() }
  func cancel() { onCancel() }
}
