// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Dispatch
  import Glibc
  import KernelLockTable

  // Dispatch's vnode sources (kqueue's EVFILT_VNODE), as Liaison's Apple code uses them. Not
  // `DispatchSourceProtocol`: swift-corelibs-libdispatch's extensions of it cast every source to
  // its own class, so the model's sources are of a protocol of the model's, with the same name and
  // the members Liaison calls.

  /// A vnode source: what XNU reports about a file. The Darwin protocol of that name.
  public protocol DispatchSourceFileSystemObject: AnyObject, Sendable {
    /// What happened since the last delivery (read from the event handler).
    var data: DispatchSource.FileSystemEvent { get }
    func setEventHandler(handler: (@Sendable () -> Void)?)
    func setCancelHandler(handler: (@Sendable () -> Void)?)
    func resume()
    func cancel()
  }

  /// The flag of `open` for a descriptor that only watches: an ordinary read-only open here.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let O_EVTONLY: Int32 = O_RDONLY

  extension DispatchSource {
    /// A vnode source on `fileDescriptor`, which must stay open until the source's cancel handler
    /// runs. The corresponding Darwin call is `makeFileSystemObjectSource`.
    public static func makeFileSystemObjectSource(
      fileDescriptor: Int32, eventMask: FileSystemEvent, queue: DispatchQueue? = nil
    ) -> any DispatchSourceFileSystemObject {
      VnodeSource(fileDescriptor, eventMask, queue ?? DispatchQueue.global())
    }
  }

  /// The model's vnode source: an inotify watch on the file (writes, attributes) and one on the
  /// model's folder of the file's `flock`s (their releases, see `Locks.swift`).
  final class VnodeSource: DispatchSourceFileSystemObject, @unchecked Sendable {
    private let mask: DispatchSource.FileSystemEvent
    private let queue: DispatchQueue
    private let mutex = ModelMutex()
    private var subscriptions: [UInt64] = []
    private var pending: DispatchSource.FileSystemEvent = []
    private var current: DispatchSource.FileSystemEvent = []
    private var queued = false
    private var resumed = false
    private var cancelled = false
    private var eventHandler: (@Sendable () -> Void)?
    private var cancelHandler: (@Sendable () -> Void)?
    /// Releases already reported by their write (see `Locks.swift`): their close is not another.
    private var reported: Set<String> = []
    private var size: Int64

    init(_ fd: Int32, _ mask: DispatchSource.FileSystemEvent, _ queue: DispatchQueue) {
      self.mask = mask
      self.queue = queue
      var info = stat()
      fstat(fd, &info)
      size = Int64(info.st_size)
      let fileEvents = UInt32(IN_MODIFY) | UInt32(IN_ATTRIB)
      if let id = ModelLoop.shared.watch(
        "/proc/self/fd/\(fd)", mask: fileEvents,
        { [weak self] mask, _ in
          self?.fileChanged(mask, fd: fd)
        })
      {
        subscriptions.append(id)
      }
      if mask.contains(.funlock) {
        let folder = DarwinModelFiles.unlocksFolder(info)
        mkdir(folder, 0o700)
        let inode = UInt64(info.st_ino)
        let events = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE)
        if let id = ModelLoop.shared.watch(
          folder, mask: events,
          { [weak self] mask, name in
            self?.lockReleased(mask, name: name, inode: inode)
          })
        {
          subscriptions.append(id)
        }
      }
    }

    private func fileChanged(_ events: UInt32, fd: Int32) {
      var happened: DispatchSource.FileSystemEvent = []
      if events & UInt32(IN_MODIFY) != 0 {
        happened.insert(.write)
        var info = stat()
        if fstat(fd, &info) == 0 {
          let grew = mutex.locked { () -> Bool in
            defer { size = Int64(info.st_size) }
            return Int64(info.st_size) > size
          }
          if grew { happened.insert(.extend) }
        }
      }
      if events & UInt32(IN_ATTRIB) != 0 { happened.insert(.attrib) }
      add(happened)
    }

    /// An entry of the file's folder of locks was written (a release, made by a call: reported at
    /// once) or closed without a write (its process died, or closed it otherwise: reported once the
    /// kernel's table shows that process's `flock` on the file gone, as XNU posts NOTE_FUNLOCK after
    /// the release).
    private func lockReleased(_ events: UInt32, name: String, inode: UInt64) {
      if events & UInt32(IN_MODIFY) != 0 {
        mutex.locked { _ = reported.insert(name) }
        add(.funlock)
        return
      }
      if mutex.locked({ reported.remove(name) }) != nil { return }
      guard let pid = name.split(separator: ".").first.flatMap({ Int32($0) }) else { return }
      DispatchQueue.global().async { [weak self] in
        for _ in 0..<1_000 where Self.holdsFlock(pid: pid, inode: inode) { usleep(1_000) }
        self?.add(.funlock)
      }
    }

    /// Whether the kernel's table lists a `flock` that process `pid` holds on the file `inode`.
    private static func holdsFlock(pid: Int32, inode: UInt64) -> Bool {
      guard let lines = try? KernelLocks.lines() else { return false }
      return lines.contains { line in
        let fields = line.split(separator: " ")
        guard fields.count >= 6, fields[1] == "FLOCK" else { return false }
        return fields[4] == "\(pid)" && fields[5].hasSuffix(":\(inode)")
      }
    }

    private func add(_ events: DispatchSource.FileSystemEvent) {
      let wanted = events.intersection(mask)
      guard !wanted.isEmpty else { return }
      let schedule = mutex.locked { () -> Bool in
        pending.formUnion(wanted)
        guard resumed, !cancelled, !queued else { return false }
        queued = true
        return true
      }
      if schedule { queue.async { self.deliver() } }
    }

    private func deliver() {
      let handler = mutex.locked { () -> (@Sendable () -> Void)? in
        queued = false
        current = pending
        pending = []
        return cancelled || current.isEmpty ? nil : eventHandler
      }
      handler?()
    }

    var data: DispatchSource.FileSystemEvent { mutex.locked { current } }

    func setEventHandler(handler: (@Sendable () -> Void)?) { mutex.locked { eventHandler = handler } }

    func setCancelHandler(handler: (@Sendable () -> Void)?) { mutex.locked { cancelHandler = handler } }

    func resume() {
      let schedule = mutex.locked { () -> Bool in
        resumed = true
        guard !pending.isEmpty, !queued, !cancelled else { return false }
        queued = true
        return true
      }
      if schedule { queue.async { self.deliver() } }
    }

    func cancel() {
      let ending = mutex.locked { () -> [UInt64]? in
        guard !cancelled else { return nil }
        cancelled = true
        defer { subscriptions = [] }
        return subscriptions
      }
      guard let ending else { return }
      for id in ending { ModelLoop.shared.cancel(id) }
      queue.async {
        let handler = self.mutex.locked { () -> (@Sendable () -> Void)? in
          defer {
            self.cancelHandler = nil
            self.eventHandler = nil
          }
          return self.cancelHandler
        }
        handler?()
      }
    }
  }
#endif
