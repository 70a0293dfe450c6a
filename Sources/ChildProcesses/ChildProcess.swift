// Starting and waiting for child processes: one way, for the `liaison` command's demo, the
// benchmark and the tests. Foundation's `Process` on Linux puts the child in a process group of
// its own and passes on the spawning thread's signal mask (Dispatch's threads block nearly every
// signal), so its children ignore Ctrl-C and `kill -TERM`; this starts them with `posix_spawn`
// and explicit attributes instead.

import CLiaison
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How a child process ended.
public enum Termination: Sendable, Hashable, CustomStringConvertible {
  /// It exited with this status.
  case exited(Int32)
  /// A signal with this number ended it.
  case killed(by: Int32)

  /// The status a shell reports for it: the exit status, or 128 + the signal's number.
  public var shellStatus: Int32 {
    switch self {
    case .exited(let status): status
    case .killed(let signal): 128 + signal
    }
  }

  public var description: String {
    switch self {
    case .exited(let status): "exited with status \(status)"
    case .killed(let signal): "killed by signal \(signal)"
    }
  }
}

/// A child process: an ordinary member of this process's session and process group, with no
/// signal blocked and every signal's action the default, its standard streams piped to this
/// process, inherited, or sent to `/dev/null`.
///
/// A child still running when its `ChildProcess` is released is killed and reaped.
public final class ChildProcess: @unchecked Sendable {
  /// What a child's standard stream is connected to.
  public enum Stream: Sendable, Equatable {
    /// This process's own.
    case inherit
    /// A pipe to or from this process.
    case pipe
    /// `/dev/null`.
    case discard
    /// This open descriptor of this process (a file, one end of a pipe), which the caller keeps
    /// and closes.
    case descriptor(CInt)
  }

  /// The child's process id.
  public let pid: pid_t
  /// The write end of the pipe to the child's standard input, when piped.
  public let inputDescriptor: CInt?
  /// The read end of the pipe from the child's standard output, when piped.
  public let outputDescriptor: CInt?
  /// The read end of the pipe from the child's standard error, when piped.
  public let errorDescriptor: CInt?

  private let lock = NSLock()
  private var termination: Termination?
  private var inputOpen: Bool
  private var buffered: [UInt8] = []

  /// Starts `executable` with `arguments`.
  ///
  /// - Parameters:
  ///   - executable: a path, or a name looked up on `PATH` when it has no `/`.
  ///   - environment: variables added to (or replacing) this process's environment.
  /// - Throws: ``SpawnError`` when the program cannot be started.
  public init(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    input: Stream = .pipe, output: Stream = .pipe, errors: Stream = .inherit
  ) throws(SpawnError) {
    var environmentLines: [String]?
    if let environment {
      environmentLines = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0)=\($1)" }
    }
    var pipes: [(parent: CInt, child: CInt)?] = []
    do throws(SpawnError) {
      for (stream, childReads) in [(input, true), (output, false), (errors, false)] {
        pipes.append(stream == .pipe ? try Self.makePipe(childReads: childReads) : nil)
      }
    } catch {
      for case let pipe? in pipes {
        _ = close(pipe.parent)
        _ = close(pipe.child)
      }
      throw error
    }
    defer { for case let pipe? in pipes { _ = close(pipe.child) } }

    var actions = noFileActions
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (target, stream) in [(0, input), (1, output), (2, errors)] {
      switch stream {
      case .pipe: posix_spawn_file_actions_adddup2(&actions, pipes[Int(target)]!.child, CInt(target))
      case .discard: posix_spawn_file_actions_addopen(&actions, CInt(target), "/dev/null", O_RDWR, 0)
      case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, CInt(target))
      case .inherit:
        #if canImport(Darwin)
          posix_spawn_file_actions_addinherit_np(&actions, CInt(target))
        #endif
        break
      }
    }
    var attributes = noAttributes
    Self.configure(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environmentLines.map { $0.map { strdup($0) } + [nil] }
    defer {
      for pointer in argv { free(pointer) }
      for pointer in envp ?? [] { free(pointer) }
    }
    var child: pid_t = 0
    let result = (envp ?? []).withUnsafeBufferPointer { envBuffer in
      let environ = envp == nil ? currentEnvironment() : UnsafePointer(envBuffer.baseAddress!)
      return executable.contains("/")
        ? posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        : posix_spawnp(&child, executable, &actions, &attributes, argv, environ)
    }
    guard result == 0 else {
      for case let pipe? in pipes { _ = close(pipe.parent) }
      throw SpawnError("cannot start \(executable): \(String(cString: strerror(result)))")
    }
    pid = child
    inputDescriptor = pipes[0]?.parent
    outputDescriptor = pipes[1]?.parent
    errorDescriptor = pipes[2]?.parent
    inputOpen = inputDescriptor != nil
  }

  deinit {
    if !hasExited {
      kill(SIGKILL)
      _ = wait()
    }
    closeInput()
    for fd in [outputDescriptor, errorDescriptor] { if let fd { _ = close(fd) } }
  }

  // MARK: - Input and output

  /// Writes `line` and a newline to the child's standard input.
  public func write(_ line: String) {
    guard let fd = inputDescriptor else { preconditionFailure("the child's input is not piped") }
    writeAll(fd, Array((line + "\n").utf8))
  }

  /// Closes the child's standard input, so that it reads its end. Calling it again does nothing.
  public func closeInput() {
    let open = lock.withLock { () -> Bool in
      defer { inputOpen = false }
      return inputOpen
    }
    if open, let fd = inputDescriptor { _ = close(fd) }
  }

  /// Reads one line of the child's standard output, waiting at most `timeout` seconds (a failure
  /// guard: a healthy child answers at once).
  public func readLine(timeout: Double = 60) throws(SpawnError) -> String {
    guard let fd = outputDescriptor else { preconditionFailure("the child's output is not piped") }
    let deadline = Date().addingTimeInterval(timeout)
    while true {
      if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffered[..<newline], as: UTF8.self)
        buffered.removeSubrange(...newline)
        return line
      }
      let remaining = deadline.timeIntervalSinceNow
      guard remaining > 0 else { throw SpawnError("no line from pid \(pid) within \(timeout) s") }
      var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      guard poll(&poller, 1, Int32(remaining * 1000)) > 0 else { continue }
      let chunk = readChunk(fd)
      if chunk.isEmpty { throw SpawnError("pid \(pid) closed its output") }
      buffered += chunk
    }
  }

  /// Reads the child's standard output and error (those piped) to their ends, then waits for the
  /// child to exit.
  public func finish() -> (output: String, errors: String, termination: Termination) {
    closeInput()
    var collected: [CInt: [UInt8]] = [:]
    var open = [outputDescriptor, errorDescriptor].compactMap { $0 }
    if let out = outputDescriptor { collected[out] = buffered }
    buffered = []
    while !open.isEmpty {
      var pollers = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
      guard poll(&pollers, nfds_t(pollers.count), -1) > 0 else { continue }
      for poller in pollers where poller.revents != 0 {
        let chunk = readChunk(poller.fd)
        if chunk.isEmpty { open.removeAll { $0 == poller.fd } } else { collected[poller.fd, default: []] += chunk }
      }
    }
    let text = { (fd: CInt?) in fd.map { String(decoding: collected[$0] ?? [], as: UTF8.self) } ?? "" }
    return (text(outputDescriptor), text(errorDescriptor), wait())
  }

  // MARK: - Signals and the end

  /// Sends `signal` to the child, unless it has been reaped already (its pid may be another
  /// process's by then).
  public func kill(_ signal: Int32) {
    lock.withLock {
      guard termination == nil else { return }
      #if canImport(Glibc)
        _ = Glibc.kill(pid, signal)
      #elseif canImport(Darwin)
        _ = Darwin.kill(pid, signal)
      #endif
    }
  }

  /// Whether the child has ended (reaping it if so), without waiting.
  public var hasExited: Bool {
    lock.withLock {
      if termination != nil { return true }
      var status: CInt = 0
      guard waitpid(pid, &status, WNOHANG) == pid else { return false }
      termination = Self.termination(status)
      return true
    }
  }

  /// Waits for the child to end and tells how it ended.
  @discardableResult
  public func wait() -> Termination {
    lock.withLock {
      if let termination { return termination }
      var status: CInt = 0
      while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
      let ended = Self.termination(status)
      termination = ended
      return ended
    }
  }

  // MARK: - Plumbing

  private static func termination(_ status: CInt) -> Termination {
    // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
    let signal = status & 0x7f
    return signal == 0 ? .exited((status >> 8) & 0xff) : .killed(by: signal)
  }

  /// A pipe whose both ends are closed on `exec` (the child gets its end through `dup2`), so that
  /// a child started meanwhile by another thread never holds an end open.
  private static func makePipe(childReads: Bool) throws(SpawnError) -> (parent: CInt, child: CInt) {
    var fds: [CInt] = [-1, -1]
    #if canImport(Glibc)
      let made = cliaison_pipe_cloexec(&fds) == 0
    #else
      // Darwin has no pipe2; children are started with POSIX_SPAWN_CLOEXEC_DEFAULT instead.
      let made = pipe(&fds) == 0 && fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0 && fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0
    #endif
    guard made else { throw SpawnError("cannot make a pipe: \(String(cString: strerror(errno)))") }
    return childReads ? (fds[1], fds[0]) : (fds[0], fds[1])
  }

  /// No signal blocked, every signal's action the default, and no new process group or session;
  /// on Darwin, which has no `pipe2`, no descriptor inherited but the three streams.
  private static func configure(_ attributes: inout SpawnAttributes) {
    posix_spawnattr_init(&attributes)
    var (none, all) = signalSets()
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    #if canImport(Darwin)
      flags |= POSIX_SPAWN_CLOEXEC_DEFAULT
    #endif
    posix_spawnattr_setflags(&attributes, Int16(flags))
  }

  /// The empty set (the mask) and every signal whose action can be set (the defaults).
  private static func signalSets() -> (none: sigset_t, all: sigset_t) {
    var none = sigset_t()
    var all = sigset_t()
    sigemptyset(&none)
    #if os(Linux)
      // glibc's sigfillset leaves out its two internal signals (32 and 33), and its posix_spawn
      // then starts the child with them *ignored*, which a program that never starts a thread
      // keeps and passes on. Every bit of signals 1-64 instead.
      withUnsafeMutableBytes(of: &all) { $0.storeBytes(of: UInt64.max, as: UInt64.self) }
    #else
      sigfillset(&all)
    #endif
    sigdelset(&all, SIGKILL)
    sigdelset(&all, SIGSTOP)
    return (none, all)
  }

  private func readChunk(_ fd: CInt) -> [UInt8] {
    var chunk = [UInt8](repeating: 0, count: 65536)
    var n: Int
    repeat {
      n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
    } while n < 0 && errno == EINTR
    return n > 0 ? Array(chunk.prefix(n)) : []
  }
}

/// Writes all of `bytes` to `fd`, retrying short writes and `EINTR`; stops at any other error,
/// such as a reader that has gone (`EPIPE`), which does not end this process: `SIGPIPE` is
/// blocked on this thread for the write, and one it raised is taken off before unblocking.
public func writeAll(_ fd: CInt, _ bytes: [UInt8]) {
  var pipeSignal = sigset_t()
  var previous = sigset_t()
  sigemptyset(&pipeSignal)
  sigaddset(&pipeSignal, SIGPIPE)
  pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
  defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
  var written = 0
  while written < bytes.count {
    let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
    if n < 0 && errno == EINTR { continue }
    if n < 0 && errno == EPIPE {
      #if os(Linux)
        var none = timespec()
        _ = sigtimedwait(&pipeSignal, nil, &none)
      #else
        var pending = sigset_t()
        var taken: CInt = 0
        sigpending(&pending)
        if sigismember(&pending, SIGPIPE) == 1 { sigwait(&pipeSignal, &taken) }
      #endif
    }
    if n <= 0 { return }
    written += n
  }
}

// posix_spawn's two attribute types: opaque pointers on Darwin, structures in glibc.
#if canImport(Darwin)
  typealias SpawnFileActions = posix_spawn_file_actions_t?
  typealias SpawnAttributes = posix_spawnattr_t?
  private var noFileActions: SpawnFileActions { nil }
  private var noAttributes: SpawnAttributes { nil }
#else
  typealias SpawnFileActions = posix_spawn_file_actions_t
  typealias SpawnAttributes = posix_spawnattr_t
  private var noFileActions: SpawnFileActions { SpawnFileActions() }
  private var noAttributes: SpawnAttributes { SpawnAttributes() }
#endif

private func currentEnvironment() -> UnsafePointer<UnsafeMutablePointer<CChar>?> {
  #if canImport(Darwin)
    UnsafePointer(_NSGetEnviron().pointee!)
  #else
    UnsafePointer(environ)
  #endif
}

/// A child process could not be started, or did not answer in time.
public struct SpawnError: Error, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}
