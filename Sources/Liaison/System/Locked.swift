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
///
/// A `Locked` is a reference to one allocation, a `ManagedBuffer` holding the value and the mutex:
/// copies share the value, as a class's references do, and making one costs a single allocation
/// (an uncontended `ProcessLock` makes one per grant). The value is reached through a pointer,
/// never a class's stored `var`, whose every access costs a dynamic exclusivity check (two runtime
/// calls and a thread-local lookup); the mutex already makes the access exclusive.
package struct Locked<Value: Sendable>: @unchecked Sendable {
  /// The value as the buffer's header, the mutex as its one element.
  @usableFromInline final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
    deinit {
      _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }
  }

  /// Owns the allocation; `value` and `mutex` point into it, and stay valid while it lives (a
  /// class instance never moves).
  @usableFromInline let storage: Storage
  @usableFromInline let value: UnsafeMutablePointer<Value>
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

  package init(_ value: Value) {
    storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in value }, to: Storage.self)
    (self.value, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
    mutex.initialize(to: pthread_mutex_t())
    pthread_mutex_init(mutex, nil)
  }

  /// Whether `self` and `other` are the same value (copies of one `Locked`).
  package func isSame(as other: Locked<Value>) -> Bool { storage === other.storage }

  /// Runs `body` with exclusive access to the value. Not re-entrant. Inlinable, so that hot
  /// paths in other modules of the package (the defaults cache) get a specialised copy.
  @inlinable
  package func withLock<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    // `self`, and so `storage`, lives for the whole call: the caller holds it.
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value.pointee)
  }
}
