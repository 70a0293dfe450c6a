// Apple platforms: written against the documented `notify(3)` and Dispatch APIs, checked here by
// .ci/apple-check and built by the macOS workflow. On Linux, Liaison's CI compiles and runs it
// against a model of those calls (the package trait `DarwinModel`, Tests/DarwinModel).
#if canImport(Darwin) || DarwinModel
  #if canImport(Darwin)
    import Darwin
    import notify
  #else
    import DarwinModel
    import Glibc
  #endif
  import Dispatch

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
  /// A process has one vnode source, and one descriptor, per watched file, however many
  /// registrations watch it (``FileWatches``): an app's soft limit of descriptors is low.
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
        let watch: FileWatches.Registration
        do throws(LiaisonError) {
          let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
          guard duplicate >= 0 else {
            throw LiaisonError(.system, "Could not watch a file of the container (dup).", errno: currentErrno())
          }
          watch = try FileWatches.watch(opened: duplicate, handler)
        } catch {
          notify_cancel(registered)  // the registration made above must not outlive this failure
          throw error
        }
        return EventRegistration {
          notify_cancel(registered)
          watch.cancel()
        }
      case .writerCloses(let folder, _, let trace):
        // kqueue reports no close, but a dead writer's close releases the flock it held (a
        // NOTE_FUNLOCK), and a commit writes the file it watches. O_EVTONLY: the descriptor only
        // watches (it takes no lock and keeps no volume busy); O_NOFOLLOW: a planted link is refused.
        let watched = openat(folder, trace, O_EVTONLY | O_NOFOLLOW | O_CLOEXEC)
        guard watched >= 0 else {
          throw LiaisonError(.system, "Could not watch the file '\(trace)' of the container.", errno: currentErrno())
        }
        let watch = try FileWatches.watch(opened: watched) { _ in handler(.changed) }
        return EventRegistration { watch.cancel() }
      case .processExit(let pid):
        guard kill(pid, 0) == 0 || errno == EPERM else {
          queue.async { handler(.changed) }
          return EventRegistration {}
        }
        let source = DispatchSource.makeProcessSource(identifier: pid, eventMask: .exit, queue: queue)
        source.setEventHandler { handler(.changed) }
        let handle = SourceHandle(source)
        source.resume()
        return EventRegistration { handle.cancel() }
      case .deadline(let deadline):
        // Two timers, the first to fire wins: one on the wall clock, which counts while the
        // machine sleeps (as the boot clock the deadline is on does) but moves when the clock is
        // set; one on `DispatchTime`, which no clock change moves but which stops during sleep.
        // A clock set back then delays nothing, and neither does a sleep. A handler that fires
        // early (the clock set forward) finds nothing due and arms a new deadline. The kernel's
        // clock, not the container's: Dispatch's timers keep these deadlines (see `LiaisonClock`).
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
        return EventRegistration { for timer in sources { timer.cancel() } }
      }
    }

    /// Rings the doorbell that observers of a file registered for.
    static func ring(_ doorbell: String) {
      notify_post(doorbell)
    }
  }

  /// The vnode sources of this process, one per watched file, each shared by every registration
  /// that watches the file.
  enum FileWatches {
    /// A file's identity.
    fileprivate struct Key: Hashable {
      let device: UInt64
      let inode: UInt64
    }

    /// One vnode source and the handlers it calls.
    private final class Watched: @unchecked Sendable {
      // Guarded by `FileWatches.state`'s lock.
      var handlers: [UInt64: @Sendable (WatchEvents) -> Void] = [:]
      var source: SourceHandle?
    }

    private struct State {
      var watched: [Key: Watched] = [:]
      var nextID: UInt64 = 0
    }

    private static let state = Locked(State())

    /// One registration's share of a vnode source.
    struct Registration: Sendable {
      fileprivate let key: Key
      fileprivate let id: UInt64

      /// Ends the registration, and the source with the file's last one.
      func cancel() {
        let ended = FileWatches.state.withLock { state -> SourceHandle? in
          guard let watched = state.watched[key] else { return nil }
          watched.handlers[id] = nil
          guard watched.handlers.isEmpty else { return nil }
          state.watched[key] = nil
          return watched.source
        }
        ended?.cancel()
      }
    }

    /// Calls `handler` on the event loop's queue for what happens to the file open as `watched`:
    /// its writes, extensions and attribute changes (``WatchEvents/changed``), and the release of
    /// any `flock` on it (``WatchEvents/unlocked``). Takes `watched`, which it closes: at once
    /// when the file has a source already, else when the source ends.
    static func watch(opened watched: CInt, _ handler: @escaping @Sendable (WatchEvents) -> Void)
      throws(LiaisonError) -> Registration
    {
      let key: Key
      switch Syscall.status(watched) {
      case .success(let info): key = Key(device: deviceNumber(info.st_dev), inode: UInt64(info.st_ino))
      case .failure(let error):
        Syscall.close(watched)
        throw LiaisonError(.system, "Could not watch a file of the container (fstat).", errno: error)
      }
      let (registration, kept) = state.withLock { state -> (Registration, Bool) in
        state.nextID += 1
        let registration = Registration(key: key, id: state.nextID)
        if let existing = state.watched[key] {
          existing.handlers[registration.id] = handler
          return (registration, false)
        }
        let created = Watched()
        created.handlers[registration.id] = handler
        created.source = source(owning: watched, for: created)
        state.watched[key] = created
        return (registration, true)
      }
      if !kept { Syscall.close(watched) }
      return registration
    }

    /// A vnode source on `watched`, which it closes when cancelled, as Dispatch requires. Each
    /// delivery carries what happened since the last one (the source is edge-triggered,
    /// `EV_CLEAR`): only a `NOTE_FUNLOCK` is ``WatchEvents/unlocked``, anything else
    /// ``WatchEvents/changed``.
    private static func source(owning watched: CInt, for owner: Watched) -> SourceHandle {
      let source = DispatchSource.makeFileSystemObjectSource(
        fileDescriptor: watched, eventMask: [.write, .extend, .attrib, .funlock], queue: EventLoop.queue)
      let handle = SourceHandle(source)
      source.setEventHandler {
        let happened = handle.fileEvents
        var events: WatchEvents = []
        if happened.contains(.funlock) { events.insert(.unlocked) }
        if !happened.subtracting(.funlock).isEmpty { events.insert(.changed) }
        let handlers = FileWatches.state.withLock { _ in Array(owner.handlers.values) }
        for handler in handlers { handler(events.isEmpty ? .changed : events) }
      }
      source.setCancelHandler { Syscall.close(watched) }
      source.resume()
      return handle
    }
  }

  /// A dispatch source that a `@Sendable` closure may capture. Dispatch sources are thread-safe,
  /// but not every SDK (nor swift-corelibs-libdispatch) declares them `Sendable`.
  private struct SourceHandle: @unchecked Sendable {
    private let vnode: (any DispatchSourceFileSystemObject)?
    private let end: () -> Void

    init(_ source: any DispatchSourceFileSystemObject) {
      vnode = source
      end = { source.cancel() }
    }

    init(_ source: any DispatchSourceProcess) {
      vnode = nil
      end = { source.cancel() }
    }

    init(_ source: any DispatchSourceTimer) {
      vnode = nil
      end = { source.cancel() }
    }

    func cancel() { end() }

    /// What a vnode source's current delivery reports.
    var fileEvents: DispatchSource.FileSystemEvent { vnode?.data ?? [] }
  }
#endif
