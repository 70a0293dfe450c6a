/// What an ``EventLoop`` registration waits for.
enum WatchTarget: Sendable {
  /// A change to a file of the container. On Linux (`inotify`): any write or truncation, and any
  /// close of a descriptor that was open for writing (which includes a holder's exit), all
  /// reported as ``WatchEvents/changed``. On Apple platforms (a vnode source): writes, extensions
  /// and attribute changes (``WatchEvents/changed``), and the release of any `flock` on the file,
  /// by any descriptor of any process, this one's own probes included (`NOTE_FUNLOCK`,
  /// ``WatchEvents/unlocked``). `doorbell` is the name writers ring on platforms where writes do
  /// not notify by themselves (``WatchEvents/changed``).
  case file(descriptor: CInt, doorbell: String)
  /// The exit of a process. Fires once, when the process has exited, before its parent reaps it:
  /// on Linux after its descriptors (and so its locks) are released, on Apple platforms perhaps
  /// before (XNU makes a dying process a zombie, then closes its files). Fires at once if the
  /// process does not exist.
  case processExit(Int32)
  /// A moment on the boot clock (``SystemClock/bootNanoseconds()``). Fires once.
  case deadline(UInt64)
  /// What a writer of the file `name`, in the folder whose descriptor is `folder`, leaves behind
  /// when it dies, in any process. On Linux: the close of any descriptor open for writing on
  /// `name` (`IN_CLOSE_WRITE`; the file is not opened, as closing a descriptor on an SQLite
  /// database would drop the `fcntl` locks SQLite holds on it). On Apple platforms, whose `kqueue`
  /// reports no close: the writes of `trace`, and the release of any `flock` on it, a dead
  /// holder's release included (`NOTE_WRITE`, `NOTE_EXTEND`, `NOTE_FUNLOCK`), through a descriptor
  /// opened with `O_EVTONLY`, which takes no lock. `trace` is a file every writer holds a `flock`
  /// on while it writes (the store's write lock: then `trace` is `name`), or that every commit
  /// writes (a database's `-wal`).
  case writerCloses(folder: CInt, name: String, trace: String)
}

/// What woke a registration: see ``WatchTarget`` for what each platform reports.
package struct WatchEvents: OptionSet, Sendable, Hashable {
  package let rawValue: UInt8
  package init(rawValue: UInt8) { self.rawValue = rawValue }

  /// The file was written or rang, a process exited, a deadline passed: look again.
  package static let changed = WatchEvents(rawValue: 1)
  /// Only a `flock` on the file was released (Apple's `NOTE_FUNLOCK`), by any process, this one
  /// included. A handler whose own reaction takes and releases a lock on the file must not look
  /// again at every such event, or it wakes itself forever (see `PresenceWatch`).
  package static let unlocked = WatchEvents(rawValue: 2)
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
  /// Calls `handler` on the event loop's thread whenever a writer of the file `name` may have
  /// died, in any process, until the returned registration ends: how the store learns that a
  /// writer died between its commit and its ring, without polling. What wakes it depends on the
  /// platform (see ``WatchTarget/writerCloses(folder:name:)``); live writers wake it too, so the
  /// handler checks whether anything is owed. It must return quickly and never wait.
  ///
  /// - Parameters:
  ///   - name: the file whose writers' closes Linux reports.
  ///   - trace: the file whose writes and unlocks Apple platforms report instead (see
  ///     ``WatchTarget/writerCloses(folder:name:trace:)``); `name` by default.
  package func watchWriterCloses(
    of name: String, trace: String? = nil, _ handler: @escaping @Sendable () -> Void
  ) throws(LiaisonError) -> EventRegistration {
    try EventLoop.watch(.writerCloses(folder: descriptor, name: name, trace: trace ?? name)) { _ in handler() }
  }
}

/// For tests: waits until the event loop has run what was queued on it before the call (on Apple
/// platforms, the cancel handlers that close the descriptors of ended watches). Does nothing on
/// Linux, whose loop closes them as registrations end.
package enum EventLoopProbe {
  package static func drain() {
    #if canImport(Darwin) || DarwinModel
      EventLoop.queue.sync {}
    #endif
  }
}
