#if Postgres
  import Liaison
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// The sockets of connections, as descriptors of this process: what a command run under a lock
  /// inherits so that it holds the lock's session (see ``HeldSession/leaveOpenUntilExit()``).
  enum ConnectionSockets {
    /// A stream socket connected to the Unix-domain socket at `path` (a server on this host),
    /// whose descriptor is known from the start: such sockets have no address to find them by.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when nothing listens there.
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
      #if canImport(Darwin)
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
      #else
        let fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
      #endif
      guard fd >= 0 else { throw LiaisonError.system(currentErrno(), "make a socket for", path: path) }
      // A full listen queue would block connect(2): bounded by the connect timeout.
      var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
      _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
      let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
          retryOnInterrupt { connectSocket(fd, address, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
      }
      guard connected == 0 else {
        let error = currentErrno()
        _ = close(fd)
        throw LiaisonError(
          .unavailable,
          "Could not connect to the server: its socket '\(path)' refused (\(error)). Check that the server runs and "
            + "listens there.",
          errno: error, path: path)
      }
      return fd
    }

    /// `connect(2)`, which this type's own `connect` hides.
    private static func connectSocket(_ fd: CInt, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> CInt {
      #if canImport(Darwin)
        Darwin.connect(fd, address, length)
      #else
        Glibc.connect(fd, address, length)
      #endif
    }

    /// The descriptor of this process's TCP socket whose own and peer addresses are `local` and
    /// `remote` (a connection's, which NIO does not hand out), or `nil` when none matches.
    static func descriptor(local: SocketAddress?, remote: SocketAddress?) -> CInt? {
      guard let local, let remote, let localPort = local.port, let remotePort = remote.port else { return nil }
      let limit = min(Int(getdtablesize()), 1 << 16)
      for fd in CInt(0)..<CInt(limit) {
        guard let ownAddress = address(of: fd, peer: false), ownAddress.port == localPort,
          ownAddress.ip == local.ipAddress,
          let peerAddress = address(of: fd, peer: true), peerAddress.port == remotePort,
          peerAddress.ip == remote.ipAddress
        else { continue }
        return fd
      }
      return nil
    }

    private static func string(_ text: [CChar]) -> String {
      String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The IP address and port of `fd`'s own end, or its peer's.
    private static func address(of fd: CInt, peer: Bool) -> (ip: String, port: Int)? {
      var storage = sockaddr_storage()
      var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
      let found = withUnsafeMutablePointer(to: &storage) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
          peer ? getpeername(fd, address, &length) == 0 : getsockname(fd, address, &length) == 0
        }
      }
      guard found else { return nil }
      var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
      switch CInt(storage.ss_family) {
      case AF_INET:
        return withUnsafePointer(to: &storage) { pointer in
          pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
            var ip = address.pointee.sin_addr
            guard inet_ntop(AF_INET, &ip, &text, socklen_t(text.count)) != nil else { return nil }
            return (Self.string(text), Int(UInt16(bigEndian: address.pointee.sin_port)))
          }
        }
      case AF_INET6:
        return withUnsafePointer(to: &storage) { pointer in
          pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
            var ip = address.pointee.sin6_addr
            guard inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count)) != nil else { return nil }
            return (Self.string(text), Int(UInt16(bigEndian: address.pointee.sin6_port)))
          }
        }
      default:
        return nil
      }
    }
  }
#endif
