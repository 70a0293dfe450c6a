import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Replaces this process with `command` (after `--` on the command line), looked up on `PATH`,
/// with the signal mask and ignored signals of the process that started `liaison`.
///
/// `liaison lock` and `liaison presence claim` run their command this way, with the descriptor
/// that holds the lock or claim left open across the exec (as daemontools' `setlock` does): the
/// command *is* the holder, so the lock lasts exactly as long as the command and whatever it
/// hands the descriptor on to, even if something kills the process that ran `liaison`. The
/// command keeps `liaison`'s process id, process group and terminal, so Ctrl-C, `kill`,
/// `timeout(1)` and job control reach it as they would without `liaison`, and its exit status is
/// its own.
///
/// - Returns: only when the command could not be run: 127 when it was not found, 126 when it
///   could not be executed, after saying why on standard error.
func execute(_ command: [String]) -> Int32 {
  fflush(nil)  // what print has buffered
  CallerSignals.restore()
  let arguments = argumentVector(command)
  execvp(arguments[0]!, arguments)
  let error = errno
  for argument in arguments { free(argument) }
  return SpawnFailure(errno: error).report(command)
}

/// `command` as an argument vector for `exec`, each argument a copy to `free`, ending with `nil`:
/// the arguments after `--` as the caller gave them, byte for byte. Swift decodes arguments as
/// UTF-8 and replaces bytes that are not (a file name in another encoding) with U+FFFD, and the
/// command must get what the caller gave, not another name. (`command` itself, when the command
/// line holds no `--` followed by as many arguments.)
private func argumentVector(_ command: [String]) -> [UnsafeMutablePointer<CChar>?] {
  let count = Int(CommandLine.argc)
  let terminator = (1..<count).first { index in CommandLine.unsafeArgv[index].map { strcmp($0, "--") == 0 } ?? false }
  guard let terminator, count - terminator - 1 == command.count else { return command.map { strdup($0) } + [nil] }
  return ((terminator + 1)..<count).map { CommandLine.unsafeArgv[$0].flatMap { strdup($0) } } + [nil]
}

/// The descriptors open when `liaison` started, read before anything else runs (in `main()`):
/// those its caller passed on, which a command run as a child (``CallerSignals/spawn(_:)``) gets,
/// and no other.
enum CallerDescriptors {
  nonisolated(unsafe) private(set) static var inherited: [CInt] = []

  /// Records the descriptors open now. Call once, first thing.
  static func capture() { inherited = open() }

  /// The descriptors open now (`/dev/fd`, less the one that listed it).
  static func open() -> [CInt] {
    let listed = (try? FileManager.default.contentsOfDirectory(atPath: "/dev/fd"))?.compactMap { CInt($0) } ?? []
    return listed.filter { fcntl($0, F_GETFD) != -1 }.sorted()
  }
}

/// Why ``CallerSignals/spawn(_:)`` could not start a command.
struct SpawnFailure: Error {
  /// The `errno` of the failure.
  let errno: CInt

  /// Says why on standard error, as ``execute(_:)`` does, and returns the status to exit with:
  /// 127 when the command was not found, 126 when it could not be executed.
  func report(_ command: [String]) -> Int32 {
    if errno == ENOENT {
      printError("liaison: cannot run '\(command[0])': no such command (looked for it on PATH)")
      return 127
    }
    printError("liaison: cannot run '\(command[0])': \(String(cString: strerror(errno)))")
    return 126
  }
}

/// The signal mask and the ignored signals of the process that started `liaison`, read before
/// anything else runs (in main.swift), for the command that ``execute(_:)`` runs.
///
/// Threads that Dispatch and the Swift runtime start block nearly every signal, and an `exec`
/// keeps the calling thread's mask and every ignored signal; without this, the command would
/// start deaf to Ctrl-C and `kill -TERM`.
enum CallerSignals {
  /// Signal numbers to look at: every one Linux has (Darwin has 31; the rest are refused
  /// harmlessly).
  private static let numbers: ClosedRange<CInt> = 1...64
  nonisolated(unsafe) private static var mask = sigset_t()
  nonisolated(unsafe) private static var ignored: [Bool] = []

  /// Records the current thread's mask and every ignored signal. Call once, first thing.
  static func capture() {
    pthread_sigmask(SIG_SETMASK, nil, &mask)
    ignored = numbers.map(isIgnored)
  }

  /// Gives the calling thread the recorded mask, and each signal its recorded ignored or default
  /// action (a handler is reset by `exec` anyway).
  static func restore() {
    for (number, wasIgnored) in zip(numbers, ignored) where isIgnored(number) != wasIgnored {
      _ = signal(number, wasIgnored ? SIG_IGN : SIG_DFL)
    }
    pthread_sigmask(SIG_SETMASK, &mask, nil)
  }

  /// Starts `command` (looked up on `PATH`) as a child with the recorded mask and ignored
  /// signals, every other signal's action the default, in this process's process group, with
  /// this process's standard streams and environment, the caller's descriptors, and `passed`
  /// (at the same numbers).
  ///
  /// - Returns: the child's process id, or the `errno` of the failure.
  static func spawn(_ command: [String], passing passed: [CInt]) -> Result<pid_t, SpawnFailure> {
    fflush(nil)  // what print has buffered
    #if canImport(Darwin)
      var attributes: posix_spawnattr_t? = nil
    #else
      var attributes = posix_spawnattr_t()
    #endif
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for (number, wasIgnored) in zip(numbers, ignored) where !wasIgnored && number != SIGKILL && number != SIGSTOP {
      sigaddset(&defaults, number)
    }
    posix_spawnattr_setsigmask(&attributes, &mask)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    // Only the caller's descriptors and `passed`: not those of liaison's other connections.
    #if canImport(Darwin)
      var actions: posix_spawn_file_actions_t? = nil
      posix_spawn_file_actions_init(&actions)
      flags |= POSIX_SPAWN_CLOEXEC_DEFAULT
      for fd in CallerDescriptors.inherited + passed { posix_spawn_file_actions_addinherit_np(&actions, fd) }
    #else
      var actions = posix_spawn_file_actions_t()
      posix_spawn_file_actions_init(&actions)
      let inherited = Set(CallerDescriptors.inherited + passed)
      for fd in CallerDescriptors.open() where !inherited.contains(fd) {
        posix_spawn_file_actions_addclose(&actions, fd)
      }
      // Kept open across the exec; set again once the child runs (no other spawn happens between).
      for fd in passed { _ = fcntl(fd, F_SETFD, 0) }
      defer { for fd in passed { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } }
    #endif
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawnattr_setflags(&attributes, Int16(flags))
    let arguments = argumentVector(command)
    defer { for argument in arguments { free(argument) } }
    var child: pid_t = 0
    #if canImport(Darwin)
      let environment = _NSGetEnviron().pointee
    #else
      let environment = environ
    #endif
    let result = posix_spawnp(&child, arguments[0]!, &actions, &attributes, arguments, environment)
    return result == 0 ? .success(child) : .failure(SpawnFailure(errno: result))
  }

  private static func isIgnored(_ number: CInt) -> Bool {
    var current = sigaction()
    guard sigaction(number, nil, &current) == 0 else { return false }
    // SIG_IGN is the handler 1.
    #if os(Linux)
      return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1
    #else
      return unsafeBitCast(current.__sigaction_u.__sa_handler, to: Int.self) == 1
    #endif
  }
}
