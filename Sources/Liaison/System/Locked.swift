#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value guarded by a `pthread_mutex`, for state shared between threads of one process.
///
/// Liaison uses this rather than the standard library's `Mutex` because Thread Sanitizer
/// understands `pthread_mutex` and not the raw futex calls `Mutex` makes on Linux: with `Mutex`,
/// every access it guards is reported as a race, and real races hide among them.
package final class Locked<Value>: @unchecked Sendable {
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
  @usableFromInline var value: Value

  package init(_ value: Value) {
    self.value = value
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    pthread_mutex_init(mutex, nil)
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Runs `body` with exclusive access to the value. Not re-entrant. Inlinable, so that hot
  /// paths in other modules of the package (the defaults cache) get a specialised copy.
  @inlinable
  package func withLock<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value)
  }
}
