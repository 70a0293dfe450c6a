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
#if DarwinModel
  import DarwinModel

  // In the Darwin model, the model's (Tests/DarwinModel): `pthread_kill` refuses Dispatch's threads
  // as XNU refuses workqueue threads, and `pthread_create` has Darwin's signature.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  private func pthread_kill(_ thread: pthread_t, _ signal: CInt) -> CInt { DarwinModel.pthread_kill(thread, signal) }
  // swift-format-ignore: AlwaysUseLowerCamelCase
  private func pthread_create(
    _ thread: UnsafeMutablePointer<pthread_t?>, _ attributes: UnsafePointer<pthread_attr_t>?,
    _ body: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer?, _ argument: UnsafeMutableRawPointer?
  ) -> CInt { DarwinModel.pthread_create(thread, attributes, body, argument) }
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
///
/// The signal must reach the waiting thread, and on Apple platforms it cannot reach them all: XNU
/// refuses `pthread_kill` to a workqueue thread (`ENOTSUP`), which is what every Dispatch queue and
/// Swift's cooperative pool run on. A wait called there (``run(_:)``) runs on a thread of its own
/// while the caller waits for it.
///
/// When the signal cannot be used (the program handles it itself, for instance with
/// `SA_RESTART`, which would restart the call instead of interrupting it), or no thread can be
/// started, ``canBlock`` is `false`: the body must not block, and polls instead (see
/// ``pause(_:)``); interruptions are then seen at its next check, without any signal.
final class InterruptibleWait: Sendable {
  enum Reason: Sendable {
    case cancelled, timedOut, suspended
  }

  private struct State {
    var reason: Reason?
    var thread: pthread_t?
    var finished = false
    var spawned = false
    var canBlock = true
  }

  private let state = Locked(State())
  /// Signalled when the body returns, for ``waitUntilFinished()``.
  private let finishedWaiters = DispatchSemaphore(value: 0)

  /// Why the wait was interrupted, or `nil` while it was not.
  var interruption: Reason? { state.withLock { $0.reason } }

  /// Whether the body may block in a system call: `false` when the interrupt signal cannot
  /// interrupt one in this process, so the body polls. Set before the body runs.
  var canBlock: Bool { state.withLock { $0.canBlock } }

  /// The pause between two polls of a wait that cannot block: from 50 µs, doubling to 5 ms, so
  /// that a short wait ends soon and a long one costs little CPU. Returns the next pause.
  static func pause(_ microseconds: UInt32) -> UInt32 {
    usleep(microseconds)  // the kernel's clock: a pause of a blocked thread between two polls
    return min(microseconds * 2, 5_000)
  }

  /// Asks the wait to stop. The first reason given wins; later calls do nothing.
  ///
  /// A wait whose thread has not started yet only records the reason: the thread checks it
  /// before it blocks. Signals are sent only to a thread that is running the wait.
  func interrupt(_ reason: Reason) {
    let shouldSignal = state.withLock { state -> Bool in
      guard !state.finished, state.reason == nil else { return false }
      state.reason = reason
      // A body that cannot block sees the reason at its next poll; no signal is sent.
      return state.thread != nil && state.canBlock
    }
    if shouldSignal { signalUntilFinished() }
  }

  /// Runs `body` interruptibly, blocking the calling thread until it returns: on that thread, or,
  /// when the interrupt signal cannot reach it (a Dispatch or cooperative-pool thread on Apple
  /// platforms), on a thread of its own.
  func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    var canBlock = InterruptSignal.isUsable
    // `pthread_kill` with no signal checks whether one can be sent: XNU refuses both alike.
    if canBlock && pthread_kill(pthread_self(), 0) != 0 {
      let result = Locked<T?>(nil)
      let started = ThreadSupport.start {
        #if os(Linux)
          cliaison_name_thread("liaison-wait")  // a new thread takes its creator's name on Linux
        #endif
        result.withLock { $0 = self.runHere(canBlock: true, spawned: false, body) }
      }
      if case .success(let thread) = started {
        ThreadSupport.join(thread)
        return result.withLock { $0! }
      }
      canBlock = false  // no thread to be had: poll here
    }
    return runHere(canBlock: canBlock, spawned: false, body)
  }

  /// Runs `body` on the calling thread, which records itself for the signal.
  private func runHere<T>(canBlock: Bool, spawned: Bool, _ body: () -> T) -> T {
    // A reason set before this line is seen by the body before it blocks; one set after is
    // signalled.
    state.withLock {
      $0.thread = pthread_self()
      $0.spawned = spawned
      $0.canBlock = canBlock
    }
    let result = InterruptSignal.unblocked(body)
    state.withLock { $0.finished = true }
    finishedWaiters.signal()
    return result
  }

  /// Whether the body has started (it checks for an interruption before it first blocks).
  var hasStarted: Bool { state.withLock { $0.thread != nil } }

  /// Blocks until the wait's body has returned (at once if it never started: it checks for an
  /// interruption before it first blocks): what ``SharedContainer/suspend()`` waits for, after
  /// interrupting the wait, so that it returns only once this process no longer waits for the lock.
  func waitUntilFinished() {
    while !state.withLock({ $0.finished || $0.thread == nil }) {
      _ = finishedWaiters.wait(timeout: .now() + .milliseconds(1))  // a semaphore's deadline: the kernel's
    }
  }

  /// Runs `body` on a new thread of its own and returns its result, or `unstarted(errno)` when
  /// no thread could be started; ``join()`` must follow.
  ///
  /// The thread is not one of Swift's cooperative pool, so the pool never blocks on a lock.
  func spawn<T: Sendable>(
    _ body: @escaping @Sendable () -> T, unstarted: @escaping @Sendable (Errno) -> T
  ) async -> T {
    let canBlock = InterruptSignal.isUsable
    return await withCheckedContinuation { continuation in
      // The thread records itself before it runs `body`, hence before the result can reach the
      // caller, so `join()` always finds it.
      let started = ThreadSupport.start {
        #if os(Linux)
          cliaison_name_thread("liaison-wait")
        #endif
        let result = self.runHere(canBlock: canBlock, spawned: true, body)
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
      // A Dispatch timer: it must fire while the waiting thread is blocked in `flock`.
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
///
/// A program may handle that signal itself (the Go runtime handles `SIGURG` and every real-time
/// signal, with `SA_RESTART`), before Liaison or after. Liaison then never sends it (the
/// program's handler would run for it) and its waits poll instead of blocking: see
/// ``isUsable``.
package enum InterruptSignal {
  package static var number: CInt {
    #if os(Linux) && !DarwinModel
      __libc_current_sigrtmax() - 3
    #else
      SIGURG
    #endif
  }

  private static let handler: @convention(c) (CInt) -> Void = { _ in }

  private static let installed: Void = {
    var current = sigaction()
    sigaction(number, nil, &current)
    // SIG_DFL is 0 and SIG_IGN is 1; anything else is a handler the program installed.
    guard handlerAddress(current) <= 1 else { return }
    var action = sigaction()
    #if os(Linux) && !DarwinModel
      action.__sigaction_handler.sa_handler = handler
    #else
      action.__sigaction_u.__sa_handler = handler
    #endif
    sigemptyset(&action.sa_mask)
    action.sa_flags = 0
    sigaction(number, &action, nil)
  }()

  /// Whether a blocked system call can be interrupted with the signal: Liaison's handler is the
  /// one installed (installing it the first time), without `SA_RESTART`. Checked at each wait, so
  /// that a handler the program installs later is noticed.
  static var isUsable: Bool {
    _ = installed
    var current = sigaction()
    guard sigaction(number, nil, &current) == 0 else { return false }
    return handlerAddress(current) == unsafeBitCast(handler, to: Int.self) && current.sa_flags & SA_RESTART == 0
  }

  private static func handlerAddress(_ action: sigaction) -> Int {
    #if os(Linux) && !DarwinModel
      unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
    #else
      unsafeBitCast(action.__sigaction_u.__sa_handler, to: Int.self)
    #endif
  }

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
    #if os(Linux) && !DarwinModel
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
