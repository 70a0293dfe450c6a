// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import CLiaison
  import Glibc

  /// The model's one thread per process: it waits on an `inotify` descriptor (files and folders of
  /// the model, and watched files) and on `pidfd`s (processes), and calls each subscriber's
  /// callback on that thread, outside its lock. Callbacks must return at once (they queue work on
  /// a Dispatch queue). Started by the first subscription; it lives as long as the process.
  final class ModelLoop: @unchecked Sendable {
    static let shared = ModelLoop()

    typealias FileCallback = @Sendable (_ mask: UInt32, _ name: String) -> Void

    private struct FileSubscriber {
      let mask: UInt32
      let callback: FileCallback
    }

    private let mutex = ModelMutex()
    private let inotify: CInt
    private let wake: CInt
    private var subscribers: [Int32: [UInt64: FileSubscriber]] = [:]
    private var watchOf: [UInt64: Int32] = [:]
    private var exits: [UInt64: (pidfd: CInt, callback: @Sendable () -> Void)] = [:]
    private var nextID: UInt64 = 0

    private init() {
      inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
      wake = cliaison_eventfd()
      precondition(inotify >= 0 && wake >= 0, "the Darwin model could not start (inotify, eventfd): errno \(errno)")
      var thread = pthread_t()
      let context = Unmanaged.passRetained(self).toOpaque()
      let started = pthread_create(
        &thread, nil,
        { context in
          Unmanaged<ModelLoop>.fromOpaque(context!).takeRetainedValue().run()
          return nil
        }, context)
      precondition(started == 0, "the Darwin model could not start its thread: \(started)")
      pthread_detach(thread)
    }

    /// Calls `callback` for every event in `mask` on the file or folder at `path` (for a folder,
    /// with the name of the entry it is about). Returns `nil` when `path` cannot be watched.
    func watch(_ path: String, mask: UInt32, _ callback: @escaping FileCallback) -> UInt64? {
      mutex.locked {
        let watch = inotify_add_watch(inotify, path, mask | UInt32(IN_MASK_ADD))
        guard watch >= 0 else { return nil }
        nextID += 1
        subscribers[watch, default: [:]][nextID] = FileSubscriber(mask: mask, callback: callback)
        watchOf[nextID] = watch
        return nextID
      }
    }

    /// Calls `callback` once, when the process that `pidfd` stands for has exited; closes `pidfd`
    /// then, or at ``cancel(_:)``.
    func watchExit(_ pidfd: CInt, _ callback: @escaping @Sendable () -> Void) -> UInt64 {
      mutex.locked {
        nextID += 1
        exits[nextID] = (pidfd, callback)
        poke()
        return nextID
      }
    }

    /// Ends a subscription; its callback is not called after this returns, unless the loop was
    /// calling it already.
    func cancel(_ id: UInt64) {
      mutex.locked {
        if let watch = watchOf.removeValue(forKey: id) {
          subscribers[watch]?[id] = nil
          if subscribers[watch]?.isEmpty == true {
            subscribers[watch] = nil
            inotify_rm_watch(inotify, watch)
          }
        }
        if let exit = exits.removeValue(forKey: id) {
          Glibc.close(exit.pidfd)
          poke()
        }
      }
    }

    private func poke() {
      var one: UInt64 = 1
      _ = write(wake, &one, 8)
    }

    private func run() {
      cliaison_name_thread("darwin-model")
      var buffer = [UInt8](repeating: 0, count: 65_536)
      while true {
        var fds = [
          pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        var ids: [UInt64] = [0, 0]
        mutex.locked {
          for (id, exit) in exits {
            fds.append(pollfd(fd: exit.pidfd, events: Int16(POLLIN), revents: 0))
            ids.append(id)
          }
        }
        guard poll(&fds, nfds_t(fds.count), -1) >= 0 else { continue }
        var due: [@Sendable () -> Void] = []
        if fds[1].revents != 0 {
          var value: UInt64 = 0
          _ = read(wake, &value, 8)
        }
        if fds[0].revents != 0 {
          while true {
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            var offset = 0
            while offset + 16 <= count {
              let (watch, mask, length) = buffer.withUnsafeBytes { raw in
                (
                  raw.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                  raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                  Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                )
              }
              let nameBytes = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
              let name = String(decoding: nameBytes, as: UTF8.self)
              mutex.locked {
                for subscriber in (subscribers[watch] ?? [:]).values where subscriber.mask & mask != 0 {
                  let callback = subscriber.callback
                  due.append { callback(mask, name) }
                }
              }
              offset += 16 + length
            }
          }
        }
        for (index, poller) in fds.enumerated().dropFirst(2) where poller.revents != 0 {
          mutex.locked {
            if let exit = exits.removeValue(forKey: ids[index]) {
              Glibc.close(exit.pidfd)
              due.append(exit.callback)
            }
          }
        }
        for callback in due { callback() }
      }
    }
  }

  /// A `pthread_mutex_t` of its own address (a Swift stored property of a struct type may move).
  final class ModelMutex: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
      pthread_mutex_destroy(mutex)
      mutex.deallocate()
    }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
      pthread_mutex_lock(mutex)
      defer { pthread_mutex_unlock(mutex) }
      return try body()
    }
  }
#endif
