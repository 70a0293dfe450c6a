#if Postgres
  import Foundation
  import Liaison
  import SystemPackage

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// The sockets of connections, made by Liaison rather than by NIO, so that each is
  /// close-on-exec from the moment it exists (NIO's own sockets are not, on Linux): a child that
  /// this process starts (`posix_spawn`, `Process`) never inherits a connection, and so never
  /// keeps its session, with the locks and claims it holds, alive after this process closed it.
  /// Their descriptors are known, too: what a command run under a lock inherits on purpose, so
  /// that it holds the lock's session (see ``HeldSession/leaveOpenUntilExit()``).
  enum ConnectionSockets {
    /// Runs `body` (a connect, which blocks) on a thread started for it and ended with it: a
    /// server that does not answer holds that thread only, never one of the threads that
    /// Swift's tasks or NIO share, whatever the number of connections being made at once.
    static func onThreadOfItsOwn<Value: Sendable>(
      _ body: @escaping @Sendable () throws(LiaisonError) -> Value
    ) async throws(LiaisonError) -> Value {
      let result = await withCheckedContinuation {
        (continuation: CheckedContinuation<Result<Value, LiaisonError>, Never>) in
        Thread { continuation.resume(returning: Result { () throws(LiaisonError) in try body() }) }.start()
      }
      return try result.get()
    }

    /// A stream socket connected to the Unix-domain socket at `path` (a server on this host).
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when nothing listens there or it
    ///   does not accept within `timeoutSeconds`.
    static func connect(toUnixSocket path: String, timeoutSeconds: Int) throws(LiaisonError) -> CInt {
      var address = sockaddr_un()
      address.sun_family = sa_family_t(AF_UNIX)
      let capacity = MemoryLayout.size(ofValue: address.sun_path)
      guard path.utf8.count < capacity else {
        throw LiaisonError(
          .invalidArgument,
          "The server's socket path '\(path)' is \(path.utf8.count) bytes long; this system allows \(capacity - 1). "
            + "Give a shorter socket folder in the URL's host.")
      }
      withUnsafeMutableBytes(of: &address.sun_path) { bytes in
        bytes.copyBytes(from: path.utf8)
        bytes[path.utf8.count] = 0
      }
      let fd = try makeSocket(family: AF_UNIX, naming: path)
      let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
          connectWithin(timeoutSeconds, fd, address, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
      }
      guard let error = connected else { return fd }
      _ = close(fd)
      throw LiaisonError(
        .unavailable,
        "Could not connect to the server: its socket '\(path)' refused (\(error)). Check that the server runs and "
          + "listens there.",
        errno: error, path: path)
    }

    /// A TCP socket connected to `host` (a name or an address) on `port`, with `options` set
    /// (level, name, value) before it connects. Each address the name resolves to is tried in
    /// turn, as libpq does, each for at most `timeoutSeconds`. Blocks its thread: run it on a
    /// thread that may block.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when the name does not resolve or
    ///   no address accepts.
    static func connect(
      toHost host: String, port: Int, timeoutSeconds: Int, options: [(level: CInt, name: CInt, value: CInt)]
    ) throws(LiaisonError) -> CInt {
      var hints = addrinfo()
      hints.ai_family = AF_UNSPEC
      #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
      #else
        hints.ai_socktype = CInt(SOCK_STREAM.rawValue)
      #endif
      hints.ai_flags = AI_NUMERICSERV
      var list: UnsafeMutablePointer<addrinfo>?
      let resolved = getaddrinfo(host, String(port), &hints, &list)
      guard resolved == 0, let first = list else {
        let reason = String(cString: gai_strerror(resolved))
        throw LiaisonError(
          .unavailable,
          "Could not connect to the server: the host name '\(host)' did not resolve (\(reason)). Check the host "
            + "name, and that this machine can reach a name server.")
      }
      defer { freeaddrinfo(first) }
      var failures: [String] = []
      var lastError: Errno?
      var entry: UnsafeMutablePointer<addrinfo>? = first
      while let address = entry {
        entry = address.pointee.ai_next
        guard let socketAddress = address.pointee.ai_addr else { continue }
        let fd = try makeSocket(family: address.pointee.ai_family, naming: "\(host):\(port)")
        for option in options {
          var value = option.value
          _ = setsockopt(fd, option.level, option.name, &value, socklen_t(MemoryLayout<CInt>.size))
        }
        guard let error = connectWithin(timeoutSeconds, fd, socketAddress, address.pointee.ai_addrlen) else {
          return fd
        }
        _ = close(fd)
        lastError = error
        failures.append("\(Self.ip(of: socketAddress) ?? host): \(error)")
      }
      throw LiaisonError(
        .unavailable,
        "Could not connect to the server at \(host) port \(port) (\(failures.joined(separator: "; "))). Check that "
          + "the server runs, listens there, and that no firewall stands between.",
        errno: lastError)
    }

    /// A new non-blocking stream socket of `family`, close-on-exec from the start (on Darwin, which
    /// has no `SOCK_CLOEXEC`, right after it is made).
    private static func makeSocket(family: CInt, naming what: String) throws(LiaisonError) -> CInt {
      #if canImport(Darwin)
        let fd = socket(family, SOCK_STREAM, 0)
        if fd >= 0 {
          _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
          _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
      #else
        let fd = socket(
          family, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue), 0)
      #endif
      guard fd >= 0 else { throw LiaisonError.system(currentErrno(), "make a socket for", path: what) }
      return fd
    }

    /// Connects the non-blocking socket `fd`, waiting at most `timeoutSeconds`; `nil` once
    /// connected, else why not (`ETIMEDOUT` when the time passed).
    private static func connectWithin(
      _ timeoutSeconds: Int, _ fd: CInt, _ address: UnsafePointer<sockaddr>, _ length: socklen_t
    ) -> Errno? {
      // The real clock, not the container's: it bounds a connect that the kernel carries out
      // (and a poll that the kernel times out), not a decision of Liaison's.
      let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
      while true {
        #if canImport(Darwin)
          let started = Darwin.connect(fd, address, length)
        #else
          let started = Glibc.connect(fd, address, length)
        #endif
        if started == 0 { return nil }
        // A Unix-domain socket whose listen queue is full: nothing is under way; try again.
        guard errno == EAGAIN else { break }
        guard ContinuousClock.now < deadline else { return .timedOut }
        usleep(10_000)  // the kernel's clock: a retry of the call while the kernel's listen queue is full
      }
      // Under way (interrupted, it goes on too): wait until it ends.
      guard errno == EINPROGRESS || errno == EINTR else { return currentErrno() }
      var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
      while true {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return .timedOut }
        let milliseconds = CInt(
          clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
        let ready = poll(&waiting, 1, milliseconds)
        if ready < 0 {
          if errno == EINTR { continue }
          return currentErrno()
        }
        if ready > 0 { break }
      }
      var error: CInt = 0
      var size = socklen_t(MemoryLayout<CInt>.size)
      guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 else { return currentErrno() }
      return error == 0 ? nil : Errno(rawValue: error)
    }

    /// The IP address of `address`, as text.
    private static func ip(of address: UnsafePointer<sockaddr>) -> String? {
      var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
      switch CInt(address.pointee.sa_family) {
      case AF_INET:
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
          var ip = address.pointee.sin_addr
          guard inet_ntop(AF_INET, &ip, &text, socklen_t(text.count)) != nil else { return nil }
          return string(text)
        }
      case AF_INET6:
        return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
          var ip = address.pointee.sin6_addr
          guard inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count)) != nil else { return nil }
          return string(text)
        }
      default:
        return nil
      }
    }

    private static func string(_ text: [CChar]) -> String {
      String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
  }
#endif
