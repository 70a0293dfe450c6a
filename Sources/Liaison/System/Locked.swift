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
/// The mutex and the value share one allocation, and the value is reached through a pointer
/// rather than a stored `var`: a class's `var` costs a dynamic exclusivity check at every access
/// (two runtime calls and a thread-local lookup, about half the instructions of an uncontended
/// `ProcessLock` round trip), and the mutex already makes the access exclusive.
package final class Locked<Value>: @unchecked Sendable {
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
  @usableFromInline let value: UnsafeMutablePointer<Value>

  /// Where the value starts in the allocation: after the mutex, at the value's alignment.
  private static var valueOffset: Int {
    let alignment = MemoryLayout<Value>.alignment
    return (MemoryLayout<pthread_mutex_t>.stride + alignment - 1) / alignment * alignment
  }

  package init(_ value: Value) {
    let memory = UnsafeMutableRawPointer.allocate(
      byteCount: Self.valueOffset + MemoryLayout<Value>.stride,
      alignment: max(MemoryLayout<pthread_mutex_t>.alignment, MemoryLayout<Value>.alignment))
    mutex = memory.initializeMemory(as: pthread_mutex_t.self, repeating: pthread_mutex_t(), count: 1)
    pthread_mutex_init(mutex, nil)
    self.value = (memory + Self.valueOffset).initializeMemory(as: Value.self, repeating: value, count: 1)
  }

  deinit {
    value.deinitialize(count: 1)
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    UnsafeMutableRawPointer(mutex).deallocate()
  }

  /// Runs `body` with exclusive access to the value. Not re-entrant. Inlinable, so that hot
  /// paths in other modules of the package (the defaults cache) get a specialised copy.
  @inlinable
  package func withLock<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value.pointee)
  }
}
