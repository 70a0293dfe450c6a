import Dispatch

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Clocks that every process on the machine reads alike.
enum SystemClock {
  /// Nanoseconds on a clock that all processes share, that never goes back, and that keeps
  /// counting while the machine sleeps: lease expiry is measured on it.
  ///
  /// The corresponding C call is `clock_gettime` with `CLOCK_BOOTTIME` on Linux and
  /// `CLOCK_MONOTONIC` (which counts sleep on Apple platforms) elsewhere.
  static func bootNanoseconds() -> UInt64 {
    var now = timespec()
    #if os(Linux) && !DarwinModel
      clock_gettime(CLOCK_BOOTTIME, &now)
    #else
      clock_gettime(CLOCK_MONOTONIC, &now)
    #endif
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
  }

  /// Seconds since 1970 on the wall clock, for display only.
  static func wallSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }
}

extension Duration {
  /// The duration in whole nanoseconds, clamped to zero below and `UInt64.max` above.
  package var clampedNanoseconds: UInt64 {
    let (seconds, attoseconds) = components
    // A negative duration under a second has zero seconds and negative attoseconds.
    if seconds < 0 || attoseconds < 0 { return 0 }
    let (product, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return .max }
    return product.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000)).overflow
      ? .max : product + UInt64(attoseconds / 1_000_000_000)
  }
}

/// The clock of every timed decision in Liaison's libraries: lease expiries and renewals,
/// heartbeats, trust windows, the end of a turn's wait, a model's rest between updates. Each place
/// takes one when it is made, the system's by default (``system``); the tests give a manual one,
/// which moves only when they move it, so that they check the decisions without waiting for them.
///
/// Its instants are on the boot clock (``SystemClock/bootNanoseconds()``), which every process on
/// the machine reads alike: a lease's expiry written in a file means the same to all of them.
///
/// What the kernel must enforce itself keeps the kernel's clock: a `poll` or `epoll_wait`
/// timeout, a wait for a `flock`, a semaphore's or a Dispatch timer's deadline. The decisions
/// made around those waits read this clock.
package struct LiaisonClock: Clock {
  /// A moment on the boot clock, or on a manual clock's.
  package struct Instant: InstantProtocol {
    /// The time since the clock's origin (for the system's clock, the boot).
    package var sinceOrigin: Duration

    package init(sinceOrigin: Duration) { self.sinceOrigin = sinceOrigin }

    /// The instant `nanoseconds` after the origin, as ``SystemClock/bootNanoseconds()`` counts.
    package init(nanoseconds: UInt64) {
      sinceOrigin = .nanoseconds(Int64(clamping: nanoseconds))
    }

    /// Nanoseconds since the origin, as lease records store them (zero before the origin).
    package var nanoseconds: UInt64 { sinceOrigin.clampedNanoseconds }

    package func advanced(by duration: Duration) -> Instant { Instant(sinceOrigin: sinceOrigin + duration) }
    package func duration(to other: Instant) -> Duration { other.sinceOrigin - sinceOrigin }
    package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.sinceOrigin < rhs.sinceOrigin }
    package static func + (lhs: Instant, rhs: Duration) -> Instant { lhs.advanced(by: rhs) }
    package static func - (lhs: Instant, rhs: Duration) -> Instant { lhs.advanced(by: .zero - rhs) }
    package static func - (lhs: Instant, rhs: Instant) -> Duration { rhs.duration(to: lhs) }
  }

  /// What the clock reads and waits on.
  package let source: any LiaisonClockSource

  package init(_ source: any LiaisonClockSource) { self.source = source }

  /// The system's clock: the boot clock, `Task.sleep` and Dispatch's timers.
  package static let system = LiaisonClock(SystemClockSource())

  package var now: Instant { source.now }

  /// Seconds since 1970 on the wall clock: the dates that are shown or stored (when a holder
  /// claimed, when a message's id was acknowledged), never a decision's deadline.
  package var wallSeconds: Double { source.wallSeconds }

  package var minimumResolution: Duration { .nanoseconds(1) }

  package func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    try await source.sleep(until: deadline)
  }

  /// Calls `handler` every `interval`, the first time one `interval` from now, until the timer
  /// returned is cancelled.
  package func repeating(
    every interval: Duration, _ handler: @escaping @Sendable () -> Void
  ) -> any LiaisonClockTimer {
    source.repeating(every: interval, handler)
  }
}

/// What a ``LiaisonClock`` reads and waits on: the system's (``SystemClockSource``) or a
/// manual one in the tests.
package protocol LiaisonClockSource: Sendable {
  /// The present moment.
  var now: LiaisonClock.Instant { get }
  /// Seconds since 1970 on the wall clock (see ``LiaisonClock/wallSeconds``).
  var wallSeconds: Double { get }
  /// Returns once `deadline` has passed; throws `CancellationError` when the task is cancelled.
  func sleep(until deadline: LiaisonClock.Instant) async throws
  /// Calls `handler` every `interval` until the timer returned is cancelled.
  func repeating(every interval: Duration, _ handler: @escaping @Sendable () -> Void) -> any LiaisonClockTimer
}

/// A repeating timer of a ``LiaisonClock``.
package protocol LiaisonClockTimer: Sendable {
  /// Stops the timer: its handler is not called again once this returns, except for a call
  /// already under way.
  func cancel()
}

/// The system's clock: the boot clock, `Task.sleep` (on `ContinuousClock`, which counts sleep
/// like the boot clock) and a strict Dispatch timer.
package struct SystemClockSource: LiaisonClockSource {
  package init() {}

  package var now: LiaisonClock.Instant { LiaisonClock.Instant(nanoseconds: SystemClock.bootNanoseconds()) }

  package var wallSeconds: Double { SystemClock.wallSeconds() }

  package func sleep(until deadline: LiaisonClock.Instant) async throws {
    try await Task.sleep(for: now.duration(to: deadline))
  }

  /// A Dispatch timer with the `.strict` flag: the system does its best to keep to a 1 ms leeway
  /// even where it would coalesce timers (as App Nap does), at user-initiated quality of service.
  /// The kernel enforces its deadline, which a task's sleep on a busy pool would not.
  package func repeating(
    every interval: Duration, _ handler: @escaping @Sendable () -> Void
  ) -> any LiaisonClockTimer {
    let step = DispatchTimeInterval.nanoseconds(Int(clamping: interval.clampedNanoseconds))
    let timer = DispatchSource.makeTimerSource(flags: .strict, queue: DispatchQueue.global(qos: .userInitiated))
    timer.schedule(deadline: .now() + step, repeating: step, leeway: .milliseconds(1))
    timer.setEventHandler(handler: handler)
    timer.resume()
    return DispatchClockTimer(timer: timer)
  }
}

/// Unchecked because `DispatchSourceTimer` is a protocol that declares no `Sendable`; its
/// `cancel()` is safe from any thread.
private struct DispatchClockTimer: LiaisonClockTimer, @unchecked Sendable {
  let timer: any DispatchSourceTimer
  func cancel() { timer.cancel() }
}
