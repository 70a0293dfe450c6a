import CLiaison
import Foundation
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs `command` as a child of `liaison` while this process holds a lock or claim through a
/// connection, and stops it when the hold is lost: `SIGTERM`, then `SIGKILL` once `grace` has
/// passed, as `consul lock` does.
///
/// The command inherits `socket`, the connection's socket, so that it holds the session, and
/// so the lock, as well: if `liaison` dies (an OOM kill, a `SIGKILL` sent to it alone), the
/// server keeps the session for as long as the command, or a process it passed the socket on to,
/// runs — what `flock(1)` gives with a descriptor. No one then watches for the hold's loss.
///
/// The command is an ordinary member of the caller's process group, with the caller's signal
/// mask and ignored signals (see ``CallerSignals``), its standard streams and environment:
/// Ctrl-C and Ctrl-Z from a terminal reach it as they would without `liaison`. `SIGTERM`,
/// `SIGHUP`, `SIGUSR1` and `SIGUSR2` sent to `liaison` are passed on to the command; `SIGINT` and
/// `SIGQUIT`, which a terminal sends to the whole group, reach the command from the terminal, and
/// `liaison` itself ignores them while the command runs.
///
/// - Parameters:
///   - what: what is held, for the line on standard error (`the lock 'nightly-report'`).
///   - waitForLoss: waits until the hold is lost and returns why (``HeldLock/waitForLoss()``).
/// - Returns: the command's own status when it ended by itself; when it was killed by a signal,
///   `liaison` dies of the same signal (for those without a core dump), else 128+N;
///   ``ExitStatus/lockLost`` when the hold was lost, after one line on standard error, however
///   the command then ended; 127 or 126 when the command cannot be started.
func superviseCommand(
  _ command: [String], holding what: String, socket: CInt, grace: Duration,
  waitForLoss: @escaping @Sendable () async -> LiaisonError?
) async -> Int32 {
  let forwarding = SignalForwarding()
  let pid: pid_t
  switch CallerSignals.spawn(command, passing: [socket]) {
  case .success(let started): pid = started
  case .failure(let failure): return failure.report(command)
  }
  forwarding.forward(to: pid)

  let (events, continuation) = AsyncStream.makeStream(of: SupervisionEvent.self)
  // Waits without reaping (WNOWAIT), so that the pid stays the command's, for `kill`, until
  // this task reaps it below.
  let exitWatch = Thread {
    var info = siginfo_t()
    while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
    continuation.yield(.exited)
  }
  exitWatch.start()
  let lossWatch = Task {
    if let loss = await waitForLoss() { continuation.yield(.lost(loss)) }
  }
  var lost = false
  var graceTimer: Task<Void, Never>?
  for await event in events {
    switch event {
    case .exited:
      lossWatch.cancel()
      graceTimer?.cancel()
      let termination = reap(pid)
      forwarding.stop()
      return lost ? ExitStatus.lockLost : endAsTheCommandDid(termination)
    case .lost(let loss):
      lost = true
      let message = loss.message.replacingOccurrences(of: "\n", with: " ")
      printError(
        "liaison: lost \(what), so the command (pid \(pid)) no longer runs under it: sent it SIGTERM, and SIGKILL "
          + "follows in \(grace.seconds) s if it has not ended (\(message))")
      _ = kill(pid, SIGTERM)
      graceTimer = Task {
        try? await Task.sleep(for: grace)
        if !Task.isCancelled { continuation.yield(.graceOver) }
      }
    case .graceOver:
      _ = kill(pid, SIGKILL)
    }
  }
  preconditionFailure("the supervision's events ended before the command did")
}

private enum SupervisionEvent: Sendable {
  case exited
  case lost(LiaisonError)
  case graceOver
}

/// Reaps the ended child `pid` and tells how it ended.
private func reap(_ pid: pid_t) -> (signal: Int32?, status: Int32) {
  var status: CInt = 0
  while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
  // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
  let signal = status & 0x7f
  return signal == 0 ? (nil, (status >> 8) & 0xff) : (signal, 128 + signal)
}

/// The command's exit status; for a command killed by a signal that leaves no core dump, this
/// process dies of the same signal, so that its caller (a shell that stops a loop on Ctrl-C)
/// sees what it would have seen without `liaison`; 128+N for the others.
private func endAsTheCommandDid(_ termination: (signal: Int32?, status: Int32)) -> Int32 {
  guard let number = termination.signal else { return termination.status }
  if [SIGINT, SIGTERM, SIGHUP, SIGKILL, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2].contains(number) {
    fflush(nil)
    _ = signal(number, SIG_DFL)
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, number)
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
    raise(number)
  }
  return termination.status
}

/// While a supervised command runs: `SIGTERM`, `SIGHUP`, `SIGUSR1` and `SIGUSR2` sent to
/// `liaison` are passed on to it, and `SIGINT` and `SIGQUIT` (which reach the command from the
/// terminal) are ignored. Installed before the command starts, so that none is missed.
///
/// A plain signal handler, not a Dispatch signal source: on Linux, Dispatch reads signals through
/// a `signalfd`, which never sees a signal whose action is "ignore", and the default action would
/// end `liaison`.
private struct SignalForwarding {
  static let forwarded = [SIGTERM, SIGHUP, SIGUSR1, SIGUSR2]
  static let ignored = [SIGINT, SIGQUIT]

  init() {
    cliaison_signal_word_store(supervisedChild, 0)
    cliaison_signal_word_store(signalBeforeStart, 0)
    var action = sigaction()
    #if os(Linux)
      action.__sigaction_handler.sa_handler = forwardSignal
    #else
      action.__sigaction_u.__sa_handler = forwardSignal
    #endif
    action.sa_flags = SA_RESTART
    sigemptyset(&action.sa_mask)
    for number in Self.forwarded { sigaction(number, &action, nil) }
    for number in Self.ignored { _ = signal(number, SIG_IGN) }
    // A caller that ignores SIGCHLD would have the command reaped unseen, its status lost.
    _ = signal(SIGCHLD, SIG_DFL)
  }

  /// Passes the signals on to `pid` from now on, and the last one that came while it was being
  /// started (the command may run, and be signalled through `liaison`, before `posix_spawn`
  /// has returned here).
  func forward(to pid: pid_t) {
    cliaison_signal_word_store(supervisedChild, pid)
    let pending = cliaison_signal_word_load(signalBeforeStart)
    if pending != 0 { _ = kill(pid, pending) }
  }

  /// Stops passing signals on (the command has been reaped: its pid may be another's).
  func stop() { cliaison_signal_word_store(supervisedChild, -1) }
}

/// The supervised command's pid: 0 before it starts, -1 once it has been reaped. Shared with the
/// signal handler through atomic loads and stores (CLiaison), in memory of its own, made (and
/// so initialised) before the handler is installed; `nonisolated(unsafe)`: only atomics touch it.
nonisolated(unsafe) private let supervisedChild = newSignalWord()

/// A signal that came before the command's pid was known, for ``SignalForwarding/forward(to:)``.
nonisolated(unsafe) private let signalBeforeStart = newSignalWord()

private func newSignalWord() -> UnsafeMutablePointer<Int32> {
  let word = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
  word.initialize(to: 0)
  return word
}

/// Passes a signal on to the supervised command, or keeps it for the command about to start.
/// Only async-signal-safe calls (`kill`).
private func forwardSignal(_ number: CInt) {
  let child = cliaison_signal_word_load(supervisedChild)
  if child > 0 {
    _ = kill(child, number)
  } else if child == 0 {
    cliaison_signal_word_store(signalBeforeStart, number)
  }
}

extension Duration {
  /// The duration in seconds, as `liaison` prints it.
  fileprivate var seconds: String {
    let value = Double(components.seconds) + Double(components.attoseconds) / 1e18
    return value == value.rounded() ? String(Int64(value)) : String(value)
  }
}
