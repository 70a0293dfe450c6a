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
  /// The close of any descriptor open for writing on the file `name` of the folder whose
  /// descriptor is `folder`, in any process: among others, every such descriptor of a process
  /// that dies. The file is not opened (closing a descriptor on an SQLite database would drop
  /// the `fcntl` locks SQLite holds on it). Linux only (`IN_CLOSE_WRITE`): Apple's `kqueue`
  /// reports no close, so there it never fires.
  case writerCloses(folder: CInt, name: String)
}

/// A registration with the event loop, ended by ``cancel()`` or by its release.
///
/// A handler that the loop had already picked up when the registration ended may still run
/// once after `cancel()` returns; handlers must tolerate that (they hold their owner weakly, or
/// check whether it was cancelled).
package final class EventRegistration: Sendable {
  private let onCancel: Locked<(@Sendable () -> Void)?>
  init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Locked(onCancel) }
  deinit { cancel() }

  /// Ends the registration. Calling it again does nothing.
  package func cancel() {
    onCancel.withLock { $0.take() }?()
  }
}

extension PrivateFolder {
  /// Calls `handler` on the event loop's thread whenever a descriptor open for writing on the
  /// file `name` closes, in any process, until the returned registration ends: how the store
  /// learns that a writer died (its descriptors close) without polling. Linux only: on Apple
  /// platforms the handler never runs. The handler must return quickly and never wait.
  package func watchWriterCloses(
    of name: String, _ handler: @escaping @Sendable () -> Void
  ) throws(LiaisonError) -> EventRegistration {
    try EventLoop.watch(.writerCloses(folder: descriptor, name: name), handler)
  }
}
