// Linux; in the Darwin model (the package trait `DarwinModel`), the Apple event loop runs instead.
#if os(Linux) && !DarwinModel
  import CLiaison
  import Glibc

  /// The one thread per process that waits for every file change, process exit and deadline
  /// Liaison watches, however many signals, presences and observers there are.
  ///
  /// Files are watched with `inotify` (a write to a signal's or presence's file is its own
  /// doorbell), processes with `pidfd_open` (readable once the process has exited and its
  /// descriptors are closed), deadlines with `poll`'s timeout, and an `eventfd` wakes the loop when
  /// registrations change. The thread starts with the first registration and ends, closing its
  /// descriptors, when the last one is cancelled; the canceller joins it, so that the process's
  /// thread and descriptor counts return to what they were.
  ///
  /// Handlers run on the loop's thread, outside its lock, and must return quickly.
  enum EventLoop {
    /// Registers `handler` for `target`.
    static func watch(_ target: WatchTarget, _ handler: @escaping @Sendable (WatchEvents) -> Void)
      throws(LiaisonError) -> EventRegistration
    {
      let outcome = try state.withLock { state throws(LiaisonError) -> Result<(LoopInstance, UInt64), LiaisonError> in
        if state.current == nil { state.current = try LoopInstance.start() }
        let instance = state.current!
        do throws(LiaisonError) {
          return .success((instance, try instance.add(target, handler)))
        } catch {
          return .failure(error)
        }
      }
      switch outcome {
      case .success(let (instance, id)):
        return EventRegistration { EventLoop.cancel(id, in: instance) }
      case .failure(let error):
        endIfEmpty(nil)
        throw error
      }
    }

    /// Writes on Linux notify by themselves; nothing to ring.
    static func ring(_ doorbell: String) {}

    // MARK: - Internals

    struct State {
      var current: LoopInstance?
    }

    /// One lock for the registry and every instance's tables.
    static let state = Locked(State())

    private static func cancel(_ id: UInt64, in instance: LoopInstance) {
      // The registration may be gone already: a one-shot removes itself when it fires.
      endIfEmpty { _ in _ = instance.remove(id) }
    }

    /// Runs `change` under the lock; if the current instance is then empty, ends it and joins its
    /// thread (outside the lock).
    private static func endIfEmpty(_ change: ((inout State) -> Void)?) {
      let threadToJoin = state.withLock { state -> pthread_t? in
        change?(&state)
        guard let instance = state.current, instance.isEmpty else { return nil }
        // The last registration: this instance ends. A later registration starts a new one.
        state.current = nil
        return instance.stop()
      }
      guard let thread = threadToJoin else { return }
      if pthread_equal(thread, pthread_self()) != 0 {
        pthread_detach(thread)  // cancelled from one of its own handlers: it ends after them
      } else {
        ThreadSupport.join(thread)
      }
    }
  }

  /// One generation of the loop: its thread, its descriptors and its tables, all guarded by
  /// `EventLoop.state`'s lock.
  final class LoopInstance: @unchecked Sendable {
    private enum Kind {
      case file(watch: Int32)
      case process(pidfd: CInt)
      case deadline(UInt64)
    }

    private struct Entry {
      let kind: Kind
      let handler: @Sendable (WatchEvents) -> Void
    }

    private let inotify: CInt
    private let wake: CInt
    private var thread: pthread_t?
    private var entries: [UInt64: Entry] = [:]
    private var idsByWatch: [Int32: Set<UInt64>] = [:]
    /// The process and deadline entries, apart: the loop walks them at every wake-up, and a
    /// process may watch hundreds of files.
    private var processes: [UInt64: CInt] = [:]
    private var deadlines: [UInt64: UInt64] = [:]
    /// Descriptors of cancelled process watches, closed by the loop thread (never while it polls
    /// them).
    private var toClose: [CInt] = []
    private var stopped = false
    private var nextID: UInt64 = 0

    private init(inotify: CInt, wake: CInt) {
      self.inotify = inotify
      self.wake = wake
    }

    var isEmpty: Bool { entries.isEmpty }

    static func start() throws(LiaisonError) -> LoopInstance {
      let inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
      guard inotify >= 0 else {
        let error = currentErrno()
        // EMFILE is both this process's limit of descriptors and the user's of inotify instances.
        if let shortage = LiaisonError.descriptorShortage() {
          throw LiaisonError(
            .system, "Could not start watching files (inotify_init1). " + LiaisonError.descriptorAdvice(shortage)!,
            errno: shortage)
        }
        throw LiaisonError(
          .system,
          "Could not start watching files (inotify_init1): this user has as many inotify instances as "
            + "fs.inotify.max_user_instances allows. Raise it (sysctl fs.inotify.max_user_instances), or end "
            + "processes of this user that watch files.",
          errno: error)
      }
      let wake = cliaison_eventfd()
      guard wake >= 0 else {
        let error = currentErrno()
        Syscall.close(inotify)
        throw LiaisonError(
          .system,
          "Could not create the event loop's eventfd." + (LiaisonError.descriptorAdvice(error).map { " " + $0 } ?? ""),
          errno: error)
      }
      let instance = LoopInstance(inotify: inotify, wake: wake)
      switch ThreadSupport.start({ instance.run() }) {
      case .success(let thread):
        instance.thread = thread
        return instance
      case .failure(let error):
        Syscall.close(inotify)
        Syscall.close(wake)
        throw LiaisonError(
          .system, "Could not start the thread that watches the container; the process has too many threads.",
          errno: error)
      }
    }

    func add(_ target: WatchTarget, _ handler: @escaping @Sendable (WatchEvents) -> Void) throws(LiaisonError)
      -> UInt64
    {
      nextID += 1
      let id = nextID
      switch target {
      case .file(let descriptor, _):
        // Watch the very inode this descriptor has open: its /proc link cannot be swapped.
        try addWatch(id, "/proc/self/fd/\(descriptor)", UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE), handler)
      case .writerCloses(let folder, let name, _):
        // Through the folder's own descriptor: a folder renamed or replaced cannot redirect it,
        // and IN_DONT_FOLLOW refuses a symbolic link planted as the file.
        try addWatch(
          id, "/proc/self/fd/\(folder)/\(name)", UInt32(IN_CLOSE_WRITE) | UInt32(IN_DONT_FOLLOW), handler)
      case .processExit(let pid):
        let pidfd = cliaison_pidfd_open(pid)
        if pidfd >= 0 {
          entries[id] = Entry(kind: .process(pidfd: pidfd), handler: handler)
          processes[id] = pidfd
        } else {
          entries[id] = Entry(kind: .deadline(0), handler: handler)  // already gone: fire at once
          deadlines[id] = 0
        }
      case .deadline(let deadline):
        entries[id] = Entry(kind: .deadline(deadline), handler: handler)
        deadlines[id] = deadline
      }
      poke()
      return id
    }

    /// Watches `path` for `mask`, added to what the inode is watched for already (one inotify
    /// watch per inode serves every registration on it).
    private func addWatch(
      _ id: UInt64, _ path: String, _ mask: UInt32, _ handler: @escaping @Sendable (WatchEvents) -> Void
    ) throws(LiaisonError) {
      let watch = inotify_add_watch(inotify, path, mask | UInt32(IN_MASK_ADD))
      guard watch >= 0 else {
        throw LiaisonError(
          .system, "Could not watch a file of the container (inotify_add_watch). Raise fs.inotify.max_user_watches.",
          errno: currentErrno())
      }
      idsByWatch[watch, default: []].insert(id)
      entries[id] = Entry(kind: .file(watch: watch), handler: handler)
    }

    /// Removes a registration; returns whether it was there.
    func remove(_ id: UInt64) -> Bool {
      guard let entry = entries.removeValue(forKey: id) else { return false }
      switch entry.kind {
      case .file(let watch):
        idsByWatch[watch]?.remove(id)
        if idsByWatch[watch]?.isEmpty == true {
          idsByWatch[watch] = nil
          inotify_rm_watch(inotify, watch)
        }
      case .process(let pidfd):
        processes[id] = nil
        toClose.append(pidfd)
        poke()
      case .deadline:
        deadlines[id] = nil
        poke()
      }
      return true
    }

    /// Asks the thread to end; returns it for joining. Only the first call returns it.
    func stop() -> pthread_t? {
      guard !stopped else { return nil }
      stopped = true
      poke()
      return thread
    }

    private func poke() {
      var one: UInt64 = 1
      _ = write(wake, &one, 8)
    }

    // MARK: The thread

    private func run() {
      cliaison_name_thread("liaison-events")
      var buffer = [UInt8](repeating: 0, count: 4096)
      // Kept from one wake-up to the next, emptied but not freed: a wake-up allocates nothing.
      var fds: [pollfd] = []
      var ids: [UInt64] = []
      var fired: [UInt64: WatchEvents] = [:]
      var due: [(@Sendable (WatchEvents) -> Void, WatchEvents)] = []
      while true {
        // What to poll, under the lock.
        let timeout = EventLoop.state.withLock { _ -> Int32? in
          for fd in toClose { Syscall.close(fd) }
          toClose.removeAll()
          if stopped { return nil }
          fds.removeAll(keepingCapacity: true)
          ids.removeAll(keepingCapacity: true)
          fds.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0))
          fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
          ids.append(0)
          ids.append(0)
          for (id, pidfd) in processes {
            fds.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0))
            ids.append(id)
          }
          let nearest = deadlines.values.min() ?? .max
          var timeout: Int32 = -1
          if nearest != .max {
            // The kernel's clock: poll's timeout is the kernel's to keep (see `LiaisonClock`).
            let now = SystemClock.bootNanoseconds()
            timeout = nearest <= now ? 0 : Int32(clamping: (nearest - now) / 1_000_000 + 1)
          }
          return timeout
        }
        guard let timeout else { break }
        _ = poll(&fds, nfds_t(fds.count), timeout)

        EventLoop.state.withLock { _ in
          fired.removeAll(keepingCapacity: true)
          due.removeAll(keepingCapacity: true)
          if fds[1].revents != 0 {
            var value: UInt64 = 0
            _ = read(wake, &value, 8)
          }
          if fds[0].revents != 0 {
            var overflowed = false
            while true {
              let count = read(inotify, &buffer, buffer.count)
              if count <= 0 { break }
              // Room left for the largest event: the queue was empty when read, so no second
              // read (a later event makes the descriptor readable again).
              let drained = buffer.count - count >= 16 + Int(NAME_MAX) + 1
              var offset = 0
              while offset + 16 <= count {
                let watch = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int32.self) }
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                let nameLength = buffer.withUnsafeBytes {
                  $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)
                }
                if watch == -1 || mask & UInt32(IN_Q_OVERFLOW) != 0 {
                  // The kernel's queue overflowed: events were dropped, for any file. Every file
                  // handler runs (each re-reads its file), so that no change is missed.
                  overflowed = true
                }
                for id in idsByWatch[watch] ?? [] { fired[id, default: []].insert(.changed) }
                offset += 16 + Int(nameLength)
              }
              if drained { break }
            }
            if overflowed {
              for ids in idsByWatch.values {
                for id in ids { fired[id, default: []].insert(.changed) }
              }
            }
          }
          for (index, poller) in fds.enumerated().dropFirst(2) where poller.revents != 0 {
            fired[ids[index], default: []].insert(.changed)
          }
          if !deadlines.isEmpty {
            // The kernel's clock, as poll's timeout above: the deadlines it woke for.
            let now = SystemClock.bootNanoseconds()
            for (id, deadline) in deadlines where deadline <= now { fired[id, default: []].insert(.changed) }
          }
          for (id, events) in fired {
            guard let entry = entries[id] else { continue }
            due.append((entry.handler, events))
            switch entry.kind {
            case .file: break
            case .process, .deadline: _ = remove(id)  // one-shot
            }
          }
        }
        for (handler, events) in due { handler(events) }
        // The handlers are not kept until the next wake-up (they may hold what their owner freed).
        due.removeAll(keepingCapacity: true)
      }
      Syscall.close(inotify)
      Syscall.close(wake)
    }
  }
#endif
