// Apple platforms only: not compiled on Linux, so CI does not build it. Written against the
// documented `notify(3)` and Dispatch APIs.
#if canImport(Darwin)
  import Darwin
  import Dispatch
  import notify

  /// The one serial queue per process on which Liaison waits for every doorbell, process exit and
  /// deadline. Writes to the container do not notify on Apple platforms, so writers ring a
  /// `notify(3)` name (scoped by the container's identity) after each write.
  enum EventLoop {
    static let queue = DispatchQueue(label: "Liaison.EventLoop")

    static func watch(_ target: WatchTarget, _ handler: @escaping @Sendable () -> Void) throws(LiaisonError)
      -> EventRegistration
    {
      switch target {
      case .file(_, let doorbell):
        var token: Int32 = 0
        let status = notify_register_dispatch(doorbell, &token, queue) { _ in handler() }
        guard status == NOTIFY_STATUS_OK else {
          throw LiaisonError(
            .system, "Could not register for the notification '\(doorbell)' (notify status \(status)).")
        }
        return EventRegistration { notify_cancel(token) }
      case .processExit(let pid):
        guard kill(pid, 0) == 0 || errno == EPERM else {
          queue.async(execute: handler)
          return EventRegistration {}
        }
        let source = DispatchSource.makeProcessSource(identifier: pid, eventMask: .exit, queue: queue)
        source.setEventHandler(handler: handler)
        source.resume()
        return EventRegistration { source.cancel() }
      case .deadline(let deadline):
        let now = SystemClock.bootNanoseconds()
        let source = DispatchSource.makeTimerSource(queue: queue)
        // On the wall clock, which keeps counting while the machine sleeps, like the boot clock the
        // deadline is on (`DispatchTime` stops during sleep).
        source.schedule(wallDeadline: .now() + .nanoseconds(Int(clamping: deadline > now ? deadline - now : 0)))
        source.setEventHandler(handler: handler)
        source.resume()
        return EventRegistration { source.cancel() }
      }
    }

    /// Rings the doorbell that observers of a file registered for.
    static func ring(_ doorbell: String) {
      notify_post(doorbell)
    }
  }
#endif
