// Apple platforms only: not compiled on Linux. Written against the documented `notify(3)` and
// Dispatch APIs, and checked here by .ci/apple-check; the macOS workflow builds it.
#if canImport(Darwin)
  import Darwin
  import Dispatch
  import notify

  /// The one serial queue per process on which Liaison waits for every doorbell, file change,
  /// process exit and deadline.
  ///
  /// A file is watched two ways, like `inotify` watches it on Linux: writers ring a `notify(3)`
  /// name (scoped by the container's identity) after each write, and a vnode dispatch source on
  /// the file itself reports writes and unlocks. The source is what sees a writer killed between
  /// its write and its ring, a holder whose lock the kernel dropped when it died, and writes by
  /// other tools; the ring is what crosses where a vnode event may not (another sandbox's view of
  /// the file). Either one wakes the handler; extra wake-ups only cost a read.
  enum EventLoop {
    static let queue = DispatchQueue(label: "Liaison.EventLoop")

    static func watch(_ target: WatchTarget, _ handler: @escaping @Sendable () -> Void) throws(LiaisonError)
      -> EventRegistration
    {
      switch target {
      case .file(let descriptor, let doorbell):
        var token: Int32 = 0
        let status = notify_register_dispatch(doorbell, &token, queue) { _ in handler() }
        guard status == NOTIFY_STATUS_OK else {
          throw LiaisonError(
            .system, "Could not register for the notification '\(doorbell)' (notify status \(status)).")
        }
        let registered = token  // a constant: the cancel closure is @Sendable
        let vnode = try fileSource(descriptor, handler)
        return EventRegistration {
          notify_cancel(registered)
          vnode.cancel()
        }
      case .writerCloses:
        // kqueue reports no close of a descriptor: nothing to watch (see WatchTarget).
        return EventRegistration {}
      case .processExit(let pid):
        guard kill(pid, 0) == 0 || errno == EPERM else {
          queue.async(execute: handler)
          return EventRegistration {}
        }
        let source = SourceHandle(DispatchSource.makeProcessSource(identifier: pid, eventMask: .exit, queue: queue))
        source.source.setEventHandler(handler: handler)
        source.source.resume()
        return EventRegistration { source.cancel() }
      case .deadline(let deadline):
        let now = SystemClock.bootNanoseconds()
        let timer = DispatchSource.makeTimerSource(queue: queue)
        // On the wall clock, which keeps counting while the machine sleeps, like the boot clock the
        // deadline is on (`DispatchTime` stops during sleep).
        timer.schedule(wallDeadline: .now() + .nanoseconds(Int(clamping: deadline > now ? deadline - now : 0)))
        timer.setEventHandler(handler: handler)
        let source = SourceHandle(timer)
        timer.resume()
        return EventRegistration { source.cancel() }
      }
    }

    /// A vnode source on a duplicate of `descriptor`: the source owns the duplicate and closes it
    /// in its cancel handler, as Dispatch requires (the caller closes its own descriptor whenever
    /// it likes).
    private static func fileSource(_ descriptor: CInt, _ handler: @escaping @Sendable () -> Void) throws(LiaisonError)
      -> SourceHandle
    {
      let watched = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
      guard watched >= 0 else {
        throw LiaisonError(.system, "Could not watch a file of the container (dup).", errno: currentErrno())
      }
      let source = DispatchSource.makeFileSystemObjectSource(
        fileDescriptor: watched, eventMask: [.write, .extend, .funlock, .attrib], queue: queue)
      source.setEventHandler(handler: handler)
      source.setCancelHandler { Syscall.close(watched) }
      source.resume()
      return SourceHandle(source)
    }

    /// Rings the doorbell that observers of a file registered for.
    static func ring(_ doorbell: String) {
      notify_post(doorbell)
    }
  }

  /// A dispatch source that a `@Sendable` cancel closure may capture. Dispatch sources are
  /// thread-safe, but not every SDK (nor swift-corelibs-libdispatch) declares them `Sendable`.
  private struct SourceHandle: @unchecked Sendable {
    let source: any DispatchSourceProtocol
    init(_ source: any DispatchSourceProtocol) { self.source = source }
    func cancel() { source.cancel() }
  }
#endif
