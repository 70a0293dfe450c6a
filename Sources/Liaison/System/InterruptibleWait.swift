import Dispatch
import SystemPackage

#if os(Linux)
  import CLiaison
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A blocking system call (a `flock` wait) that another thread can interrupt: for cancellation,
/// a timeout, or ``SharedContainer/suspend()``.
///
/// A thread blocked in `flock` wakes only when the lock comes free or a signal arrives. Liaison
/// installs a handler that does nothing for one signal (``InterruptSignal``), without
/// `SA_RESTART`, so that the call returns `EINTR`; the waiting loop then sees why it was
/// interrupted and stops. Because a signal sent just before the thread enters the call would be
/// lost, the interrupter sends it again every millisecond until the wait reports that it ended.
/// That repetition is on the interruption path only: a release wakes the waiter through the
/// kernel, at once.
final class InterruptibleWait: Sendable {
  enum Reason: Sendable {
    case cancelled, timedOut, suspended
  }

  private struct State {
    var reason: Reason?
    var thread: pthread_t?
    var finished = false
    var spawned = false
  }

  private let state = Locked(State())

  /// Why the wait was interrupted, or `nil` while it was not.
  var interruption: Reason? { state.withLock { $0.reason } }

  /// Asks the wait to stop. The first reason given wins; later calls do nothing.
  ///
  /// A wait whose thread has not started yet only records the reason: the thread checks it
  /// before it blocks. Signals are sent only to a thread that is running the wait.
  func interrupt(_ reason: Reason) {
    let shouldSignal = state.withLock { state -> Bool in
      guard !state.finished, state.reason == nil else { return false }
      state.reason = reason
      return state.thread != nil
    }
    if shouldSignal { signalUntilFinished() }
  }

  /// Runs `body` on the calling thread, interruptibly.
  func run<T>(_ body: () -> T) -> T {
    InterruptSignal.installHandler()
    // A reason set before this line is seen by the body before it blocks; one set after is
    // signalled.
    state.withLock { $0.thread = pthread_self() }
    let result = InterruptSignal.unblocked(body)
    state.withLock { $0.finished = true }
    return result
  }

  /// Runs `body` on a new thread of its own and returns its result, or `unstarted(errno)` when
  /// no thread could be started; ``join()`` must follow.
  ///
  /// The thread is not one of Swift's cooperative pool, so the pool never blocks on a lock.
  func spawn<T: Sendable>(
    _ body: @escaping @Sendable () -> T, unstarted: @escaping @Sendable (Errno) -> T
  ) async -> T {
    InterruptSignal.installHandler()
    return await withCheckedContinuation { continuation in
      // The thread records itself before it runs `body`, hence before the result can reach the
      // caller, so `join()` always finds it.
      let started = ThreadSupport.start {
        #if os(Linux)
          cliaison_name_thread("liaison-wait")
        #endif
        self.state.withLock {
          $0.thread = pthread_self()
          $0.spawned = true
        }
        let result = InterruptSignal.unblocked(body)
        self.state.withLock { $0.finished = true }
        continuation.resume(returning: result)
      }
      if case .failure(let error) = started {
        state.withLock { $0.finished = true }
        continuation.resume(returning: unstarted(error))
      }
    }
  }

  /// Waits for the thread that ``spawn(_:)`` started to exit. It has already delivered its
  /// result, so this returns at once; it keeps the process's thread count exact.
  func join() {
    guard let thread = state.withLock({ $0.spawned ? $0.thread : nil }) else { return }
    ThreadSupport.join(thread)
  }

  private func signalUntilFinished() {
    let finished = state.withLock { state -> Bool in
      if state.finished { return true }
      if let thread = state.thread {
        // Sent under the lock: the waiting thread cannot pass `finished` and return to other
        // code while this signal is still on its way.
        _ = pthread_kill(thread, InterruptSignal.number)
      }
      return false
    }
    if !finished {
      DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { self.signalUntilFinished() }
    }
  }
}

/// The signal Liaison uses to interrupt its own blocked waits.
///
/// Its handler does nothing; it is installed once, without `SA_RESTART`, and only when the
/// program has not set a handler of its own for that signal. On Linux it is `SIGRTMAX - 3`, a
/// real-time signal that the C library, Dispatch and the Swift runtime leave alone; on Apple
/// platforms, which have no real-time signals, it is `SIGURG`, whose default action is to be
/// ignored.
enum InterruptSignal {
  static var number: CInt {
    #if os(Linux)
      __libc_current_sigrtmax() - 3
    #else
      SIGURG
    #endif
  }

  private static let installed: Bool = {
    var current = sigaction()
    sigaction(number, nil, &current)
    var action = sigaction()
    // SIG_DFL is 0 and SIG_IGN is 1; anything else is a handler the program installed.
    #if os(Linux)
      if unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) > 1 { return false }
      action.__sigaction_handler.sa_handler = { _ in }
    #else
      if unsafeBitCast(current.__sigaction_u.__sa_handler, to: Int.self) > 1 { return false }
      action.__sigaction_u.__sa_handler = { _ in }
    #endif
    sigemptyset(&action.sa_mask)
    action.sa_flags = 0
    return sigaction(number, &action, nil) == 0
  }()

  /// Installs the no-op handler the first time it is needed.
  static func installHandler() { _ = installed }

  /// Runs `body` with the signal unblocked on this thread. Threads inherit their creator's
  /// signal mask, and Dispatch's worker threads block nearly every signal.
  static func unblocked<T>(_ body: () -> T) -> T {
    var set = sigset_t()
    var previous = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, number)
    pthread_sigmask(SIG_UNBLOCK, &set, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    return body()
  }
}

/// Starting and joining threads of Liaison's own.
enum ThreadSupport {
  private final class Box {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
  }

  /// Starts a joinable thread running `body`; fails when the system has no thread to give
  /// (`EAGAIN` under a process or thread limit).
  @discardableResult
  static func start(_ body: @escaping @Sendable () -> Void) -> Result<pthread_t, Errno> {
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    #if os(Linux)
      var thread = pthread_t()
      let result = pthread_create(
        &thread, nil,
        { context in
          Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
          return nil
        }, context)
      guard result == 0 else {
        Unmanaged<Box>.fromOpaque(context).release()
        return .failure(Errno(rawValue: result))
      }
      return .success(thread)
    #else
      var thread: pthread_t?
      let result = pthread_create(
        &thread, nil,
        { context in
          Unmanaged<Box>.fromOpaque(context).takeRetainedValue().body()
          return nil
        }, context)
      guard result == 0, let thread else {
        Unmanaged<Box>.fromOpaque(context).release()
        return .failure(Errno(rawValue: result))
      }
      return .success(thread)
    #endif
  }

  static func join(_ thread: pthread_t) {
    _ = pthread_join(thread, nil)
  }
}
