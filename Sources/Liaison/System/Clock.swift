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
