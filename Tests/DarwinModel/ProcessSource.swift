// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import CLiaison
  import Dispatch
  import Glibc

  // Dispatch's process sources (kqueue's EVFILT_PROC), as Liaison's Apple code uses them.

  /// A process source. The Darwin protocol of that name.
  public protocol DispatchSourceProcess: AnyObject, Sendable {
    func setEventHandler(handler: (@Sendable () -> Void)?)
    func resume()
    func cancel()
  }

  extension DispatchSource {
    /// What a process source reports. The Darwin type of that name (only `exit` is modelled).
    public struct ProcessEvent: OptionSet, Sendable {
      public let rawValue: UInt
      public init(rawValue: UInt) { self.rawValue = rawValue }
      public static let exit = ProcessEvent(rawValue: 0x8000_0000)
    }

    /// A source that reports NOTE_EXIT when the process `identifier` exits: a pidfd turns readable
    /// when the process becomes a zombie, before its parent reaps it, as XNU posts NOTE_EXIT; at
    /// once when there is no such process, as libdispatch fakes one when the kernel refuses the
    /// registration. The corresponding Darwin call is `makeProcessSource`.
    public static func makeProcessSource(
      identifier: pid_t, eventMask: ProcessEvent, queue: DispatchQueue? = nil
    ) -> any DispatchSourceProcess {
      ProcessExitSource(identifier, queue ?? DispatchQueue.global())
    }
  }

  final class ProcessExitSource: DispatchSourceProcess, @unchecked Sendable {
    private let mutex = ModelMutex()
    private let queue: DispatchQueue
    private let pid: pid_t
    private var subscription: UInt64?
    private var handler: (@Sendable () -> Void)?
    private var started = false
    private var cancelled = false

    init(_ pid: pid_t, _ queue: DispatchQueue) {
      self.pid = pid
      self.queue = queue
    }

    func setEventHandler(handler: (@Sendable () -> Void)?) { mutex.locked { self.handler = handler } }

    func resume() {
      let start = mutex.locked { () -> Bool in
        defer { started = true }
        return !started && !cancelled
      }
      guard start else { return }
      let pidfd = cliaison_pidfd_open(pid)
      guard pidfd >= 0 else {
        exited()
        return
      }
      let id = ModelLoop.shared.watchExit(pidfd) { [weak self] in self?.exited() }
      mutex.locked { subscription = id }
    }

    private func exited() {
      queue.async {
        let handler = self.mutex.locked { self.cancelled ? nil : self.handler }
        handler?()
      }
    }

    func cancel() {
      let id = mutex.locked { () -> UInt64? in
        cancelled = true
        handler = nil
        defer { subscription = nil }
        return subscription
      }
      if let id { ModelLoop.shared.cancel(id) }
    }
  }
#endif
