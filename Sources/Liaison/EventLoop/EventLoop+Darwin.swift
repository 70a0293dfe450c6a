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
  /// the file). Either one wakes the handler, with what happened (``WatchEvents``): XNU posts a
  /// `NOTE_FUNLOCK` for every `flock` release on the file, a probe's own included, so a handler
  /// that probes must not probe again for an unlock alone (see `PresenceWatch`).
  ///
  /// On Linux, the tests run this logic against a model of these semantics (`KqueueModel`).
  enum EventLoop {
    static let queue = DispatchQueue(label: "Liaison.EventLoop")

    static func watch(_ target: WatchTarget, _ handler: @escaping @Sendable (WatchEvents) -> Void)
      throws(LiaisonError) -> EventRegistration
    {
      switch target {
      case .file(let descriptor, let doorbell):
        var token: Int32 = 0
        let status = notify_register_dispatch(doorbell, &token, queue) { _ in handler(.changed) }
        guard status == NOTIFY_STATUS_OK else {
          throw LiaisonError(
            .system, "Could not register for the notification '\(doorbell)' (notify status \(status)).")
        }
        let registered = token  // a constant: the cancel closure is @Sendable
        let vnode: SourceHandle
        do throws(LiaisonError) {
          vnode = try fileSource(duplicating: descriptor, [.write, .extend, .attrib, .funlock], handler)
        } catch {
          notify_cancel(registered)  // the registration made above must not outlive this failure
          throw error
        }
        return EventRegistration {
          notify_cancel(registered)
          vnode.cancel()
        }
      case .writerCloses(let folder, _, let trace):
        // kqueue reports no close, but a dead writer's close releases the flock it held (a
        // NOTE_FUNLOCK), and a commit writes the file it watches. O_EVTONLY: the descriptor only
        // watches (it takes no lock and keeps no volume busy); O_NOFOLLOW: a planted link is refused.
        let watched = openat(folder, trace, O_EVTONLY | O_NOFOLLOW | O_CLOEXEC)
        guard watched >= 0 else {
          throw LiaisonError(.system, "Could not watch the file '\(trace)' of the container.", errno: currentErrno())
        }
        let vnode = fileSource(owning: watched, [.write, .extend, .funlock], handler)
        return EventRegistration { vnode.cancel() }
      case .processExit(let pid):
        guard kill(pid, 0) == 0 || errno == EPERM else {
          queue.async { handler(.changed) }
          return EventRegistration {}
        }
        let source = SourceHandle(DispatchSource.makeProcessSource(identifier: pid, eventMask: .exit, queue: queue))
        source.source.setEventHandler { handler(.changed) }
        source.source.resume()
        return EventRegistration { source.cancel() }
      case .deadline(let deadline):
        // Two timers, the first to fire wins: one on the wall clock, which counts while the
        // machine sleeps (as the boot clock the deadline is on does) but moves when the clock is
        // set; one on `DispatchTime`, which no clock change moves but which stops during sleep.
        // A clock set back then delays nothing, and neither does a sleep. A handler that fires
        // early (the clock set forward) finds nothing due and arms a new deadline.
        let now = SystemClock.bootNanoseconds()
        let remaining = Int(clamping: deadline > now ? deadline - now : 0)
        let fired = Locked(false)
        let once: @Sendable () -> Void = {
          let first = fired.withLock { state -> Bool in
            defer { state = true }
            return !state
          }
          if first { handler(.changed) }
        }
        let wall = DispatchSource.makeTimerSource(queue: queue)
        wall.schedule(wallDeadline: .now() + .nanoseconds(remaining))
        wall.setEventHandler(handler: once)
        let uptime = DispatchSource.makeTimerSource(queue: queue)
        uptime.schedule(deadline: .now() + .nanoseconds(remaining))
        uptime.setEventHandler(handler: once)
        let sources = [SourceHandle(wall), SourceHandle(uptime)]
        wall.resume()
        uptime.resume()
        return EventRegistration { for source in sources { source.cancel() } }
      }
    }

    /// A vnode source on a duplicate of `descriptor`: the source owns the duplicate and closes it
    /// in its cancel handler, as Dispatch requires (the caller closes its own descriptor whenever
    /// it likes).
    private static func fileSource(
      duplicating descriptor: CInt, _ mask: DispatchSource.FileSystemEvent,
      _ handler: @escaping @Sendable (WatchEvents) -> Void
    ) throws(LiaisonError) -> SourceHandle {
      let watched = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
      guard watched >= 0 else {
        throw LiaisonError(.system, "Could not watch a file of the container (dup).", errno: currentErrno())
      }
      return fileSource(owning: watched, mask, handler)
    }

    /// A vnode source on `watched`, which it closes when cancelled. Each delivery carries what
    /// happened since the last one (the source is edge-triggered, `EV_CLEAR`): only a
    /// `NOTE_FUNLOCK` is ``WatchEvents/unlocked``, anything else ``WatchEvents/changed``.
    private static func fileSource(
      owning watched: CInt, _ mask: DispatchSource.FileSystemEvent, _ handler: @escaping @Sendable (WatchEvents) -> Void
    ) -> SourceHandle {
      let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: watched, eventMask: mask, queue: queue)
      let handle = SourceHandle(source)
      source.setEventHandler {
        let happened = handle.fileEvents
        var events: WatchEvents = []
        if happened.contains(.funlock) { events.insert(.unlocked) }
        if !happened.subtracting(.funlock).isEmpty { events.insert(.changed) }
        handler(events.isEmpty ? .changed : events)
      }
      source.setCancelHandler { Syscall.close(watched) }
      source.resume()
      return handle
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
    /// What a vnode source's current delivery reports.
    var fileEvents: DispatchSource.FileSystemEvent {
      (source as? any DispatchSourceFileSystemObject)?.data ?? []
    }
  }
#endif
