#if Postgres
  import Foundation
  import Liaison
  import LiaisonTestSupport
  import Testing

  @testable import LiaisonPostgres

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// libpq's conventions against real servers: a password from the password file or from
  /// `PGPASSWORD` only, a password file that others may read, `application_name` in
  /// `pg_stat_activity`, several hosts with one down or read-only, and `connect_timeout`.
  @Suite("PostgreSQL URLs against real servers")
  struct PostgresURLConnectionTests {
    /// The superuser's password on ``passwordServer``: with a `:` and a `\`, which the password
    /// file escapes.
    static let password = "p:ss\\w-\(UInt64.random(in: 0...UInt64.max))"
    /// A server whose TCP connections need ``password``.
    static let passwordServer = Result { try PostgresTestServer.start(durable: false, password: password) }

    let directory = TemporaryDirectory()

    /// An environment of `variables` and no other (no password file unless `PGPASSFILE` names
    /// one: `HOME` is this test's empty folder), which reads password files as this process does.
    func environment(_ variables: [String: String] = [:]) -> ConnectionEnvironment {
      ConnectionEnvironment(
        variables: ["HOME": directory.path].merging(variables) { $1 }, userName: "nobody-of-these-tests",
        homeDirectory: directory.path,
        readPasswordFile: { path throws(LiaisonError) in try ConnectionEnvironment.readPasswordFile(at: path) })
    }

    /// Opens a container at `url` with `variables` as the environment.
    func open(_ url: String, _ variables: [String: String] = [:]) async throws(LiaisonError) -> PostgresContainer {
      try await PostgresContainer(
        url: url, environment: environment(variables), namespace: "url-\(UInt32.random(in: 0...UInt32.max))")
    }

    /// The message of the error that opening a container at `url` throws (`nil` if it opens).
    func failure(_ url: String, _ variables: [String: String] = [:]) async -> LiaisonError? {
      do {
        let place = try await open(url, variables)
        await place.close()
        return nil
      } catch {
        return error
      }
    }

    /// The port of the server `place`'s connections reach.
    func serverPort(_ place: PostgresContainer) async throws -> Int {
      let rows = try await place.query("SELECT inet_server_port()", doing: "read the server's port")
      return try #require(try rows.first?.decode(Int.self))
    }

    /// A password file holding `line`, mode 0600.
    func passwordFile(_ line: String) throws -> String {
      let path = directory.path + "/pgpass-\(UInt32.random(in: 0...UInt32.max))"
      try writePrivateFile(path, "# written by \(#function)\n" + line + "\n")
      return path
    }

    /// `password` escaped for a password file.
    func escaped(_ password: String) -> String {
      password.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ":", with: "\\:")
    }

    // MARK: - Passwords

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aPasswordOnlyInThePasswordFileConnects() async throws {
      let server = try Self.passwordServer.get()
      let url = "postgres://liaison@127.0.0.1:\(server.port)/liaison?sslmode=disable"
      let file = try passwordFile("127.0.0.1:\(server.port):liaison:liaison:\(escaped(Self.password))")
      let place = try await open(url, ["PGPASSFILE": file])
      #expect(try await serverPort(place) == server.port)
      await place.close()

      // Without it, the server refuses, and the error says how to give a password.
      let missing = await failure(url)
      #expect(
        missing?.message.contains("No password was given: put it in the password file") == true,
        "\(String(describing: missing))")
      // With a wrong one, the error says where it came from (never the password).
      let wrong = try passwordFile("*:*:*:*:wrong-password")
      let refused = await failure(url, ["PGPASSFILE": wrong])
      #expect(refused?.message.contains("password authentication failed") == true, "\(String(describing: refused))")
      #expect(refused?.message.contains("The password came from the password file \"\(wrong)\"") == true)
      #expect(refused?.message.contains("wrong-password") == false)
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aPasswordOnlyInPGPASSWORDConnectsAndWinsOverThePasswordFile() async throws {
      let server = try Self.passwordServer.get()
      let url = "postgres://liaison@127.0.0.1:\(server.port)/liaison?sslmode=disable"
      let place = try await open(url, ["PGPASSWORD": Self.password])
      #expect(try await serverPort(place) == server.port)
      await place.close()
      // PGPASSWORD wins over the password file: a wrong PGPASSWORD fails though the file is right.
      let file = try passwordFile("*:*:*:*:\(escaped(Self.password))")
      let refused = await failure(url, ["PGPASSWORD": "wrong-password", "PGPASSFILE": file])
      #expect(refused?.message.contains("The password came from $PGPASSWORD") == true, "\(String(describing: refused))")
      // And the URL's password wins over both.
      let encoded = try #require(Self.password.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
      let fromURL = try await open(
        "postgres://liaison:\(encoded)@127.0.0.1:\(server.port)/liaison?sslmode=disable",
        ["PGPASSWORD": "wrong-password"])
      await fromURL.close()
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aPasswordFileThatOthersMayReadIsRefusedWithLibpqsMessage() async throws {
      let server = try Self.passwordServer.get()
      let file = try passwordFile("*:*:*:*:\(escaped(Self.password))")
      try setPermissions(file, 0o644)
      let error = await failure(
        "postgres://liaison@127.0.0.1:\(server.port)/liaison?sslmode=disable", ["PGPASSFILE": file])
      #expect(error?.code == .unsafeFile, "\(String(describing: error))")
      #expect(
        error?.message.contains(
          "password file \"\(file)\" has group or world access; permissions should be u=rw (0600) or less") == true)
      // Made private, it is used.
      try setPermissions(file, 0o600)
      let place = try await open(
        "postgres://liaison@127.0.0.1:\(server.port)/liaison?sslmode=disable", ["PGPASSFILE": file])
      await place.close()
    }

    // MARK: - application_name

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func theApplicationNameShowsInPgStatActivity() async throws {
      let server = try PostgresTestServer.shared.get()
      func applicationName(_ place: PostgresContainer) async throws -> String? {
        let rows = try await place.query(
          "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()", doing: "read")
        return try rows.first?.decode(String.self)
      }
      let byDefault = try await open(BackendPlace.url(server))
      #expect(try await applicationName(byDefault) == "liaison")
      await byDefault.close()
      // A postgres-nio configuration that names no application gets `liaison` too.
      let configured = try await PostgresContainer(
        connection: try PostgresURL(BackendPlace.url(server), environment: environment()).configuration(),
        namespace: "url-\(UInt32.random(in: 0...UInt32.max))")
      #expect(try await applicationName(configured) == "liaison")
      await configured.close()

      for (url, variables) in [
        (BackendPlace.url(server) + "&application_name=", ["PGAPPNAME": "URL-TEST-ID"]),
        (BackendPlace.url(server) + "&application_name=URL-TEST-ID", ["PGAPPNAME": "not-this"]),
      ] {
        let name = "liaison-test-\(UInt32.random(in: 0...UInt32.max))"
        let place = try await open(
          url.replacingOccurrences(of: "URL-TEST-ID", with: name),
          variables.mapValues { $0.replacingOccurrences(of: "URL-TEST-ID", with: name) })
        #expect(try await applicationName(place) == name)
        // As an operator sees it, from another session.
        let count = try server.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(name)'")
        #expect((Int(count) ?? 0) >= 1, "\(count) sessions named \(name)")
        await place.close()
      }
    }

    // MARK: - Several hosts

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func theNextHostIsTriedWhenOneIsDownAndTheErrorNamesEachHost() async throws {
      let server = try PostgresTestServer.shared.get()
      let down = try closedLoopbackPort()
      let place = try await open(
        "postgres://liaison@127.0.0.1:\(down),127.0.0.1:\(server.port)/liaison?sslmode=disable")
      #expect(try await serverPort(place) == server.port)
      await place.close()

      // Through PGHOST and PGPORT, the same.
      let variables = try await open(
        "postgres:///liaison?sslmode=disable",
        ["PGHOST": "127.0.0.1,127.0.0.1", "PGPORT": "\(down),\(server.port)", "PGUSER": "liaison"])
      #expect(try await serverPort(variables) == server.port)
      await variables.close()

      let other = try closedLoopbackPort()
      let error = await failure("postgres://liaison@127.0.0.1:\(down),[::1]:\(other)/liaison?sslmode=disable")
      #expect(error?.code == .unavailable)
      let message = error?.message ?? ""
      #expect(message.contains("Could not connect to any of the 2 PostgreSQL servers, tried in order"), "\(message)")
      #expect(message.contains("127.0.0.1:\(down): ") && message.contains("[::1]:\(other): "), "\(message)")
      #expect(message.contains("refused"), "\(message)")
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func targetSessionAttrsPassesOverAServerThatDoesNotFit() async throws {
      let writable = try PostgresTestServer.shared.get()
      let readOnly = try PostgresTestServer.start(durable: false)
      // Every new session of its database is read-only, as on a standby (but not in recovery).
      try readOnly.psql("ALTER DATABASE liaison SET default_transaction_read_only = on")
      let hosts = "127.0.0.1:\(readOnly.port),127.0.0.1:\(writable.port)"

      let place = try await open("postgres://liaison@\(hosts)/liaison?sslmode=disable&target_session_attrs=read-write")
      #expect(try await serverPort(place) == writable.port)
      let setting = try await place.query("SHOW transaction_read_only", doing: "read").first?.decode(String.self)
      #expect(setting == "off")
      await place.close()

      func port(_ attributes: String) async throws -> Int {
        try await connectedPort(
          "postgres://liaison@\(hosts)/liaison?sslmode=disable&target_session_attrs=\(attributes)")
      }
      #expect(try await port("any") == readOnly.port)
      #expect(try await port("read-write") == writable.port)
      #expect(try await port("read-only") == readOnly.port)
      #expect(try await port("primary") == readOnly.port)
      #expect(try await port("prefer-standby") == readOnly.port)  // no standby: the first that answers

      let error = await #expect(throws: LiaisonError.self) { try await port("standby") }
      let message = error?.message ?? ""
      #expect(message.contains("127.0.0.1:\(readOnly.port): the server is not a standby"), "\(message)")
      #expect(message.contains("127.0.0.1:\(writable.port): the server is not a standby"), "\(message)")
      #expect(message.contains("target_session_attrs is standby"), "\(message)")
    }

    /// A primary and its hot standby, streaming (made with `pg_basebackup`): each
    /// `target_session_attrs` takes the server it names, in either order.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func targetSessionAttrsTellsAStandbyFromItsPrimary() async throws {
      let primary = try PostgresTestServer.start(durable: false)
      let standby = try PostgresTestServer.startStandby(of: primary)
      #expect(try standby.psql("SELECT pg_is_in_recovery()") == "t")
      let standbyFirst = "127.0.0.1:\(standby.port),127.0.0.1:\(primary.port)"
      let primaryFirst = "127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)"

      // A container after a failover's order: the standby is listed first, and passed over.
      let place = try await open(
        "postgres://liaison@\(standbyFirst)/liaison?sslmode=disable&target_session_attrs=read-write")
      #expect(try await serverPort(place) == primary.port)
      await place.close()

      for (hosts, attributes, expected) in [
        (standbyFirst, "primary", primary.port), (standbyFirst, "read-write", primary.port),
        (standbyFirst, "any", standby.port), (primaryFirst, "standby", standby.port),
        (primaryFirst, "read-only", standby.port), (primaryFirst, "prefer-standby", standby.port),
        (primaryFirst, "any", primary.port),
      ] {
        let port = try await connectedPort(
          "postgres://liaison@\(hosts)/liaison?sslmode=disable&target_session_attrs=\(attributes)")
        #expect(port == expected, "\(attributes) over \(hosts)")
      }
      let error = await #expect(throws: LiaisonError.self) {
        try await connectedPort(
          "postgres://liaison@127.0.0.1:\(standby.port)/liaison?sslmode=disable&target_session_attrs=primary")
      }
      #expect(
        error?.message.contains("127.0.0.1:\(standby.port): the server is a standby (in recovery)") == true,
        "\(String(describing: error))")
    }

    /// The port of the server that a connector for `url` connects to. The connector alone: a
    /// container writes its tables as it opens, which a read-only server or a standby refuses.
    func connectedPort(_ url: String) async throws -> Int {
      let targets = try PostgresURL(url, environment: environment()).connectionTargets()
      let connector = Connector(
        targets: targets, timing: DetectionTiming(bound: .seconds(10)),
        logger: PostgresContainer.Configuration.quietLogger,
        maximumIdle: 0)
      do {
        let connection = try await connector.connect()
        let rows = try await Connector.run(
          "SELECT inet_server_port()", on: connection, within: .seconds(10), logger: connector.logger)
        await connector.closeAll()
        return try #require(try rows.first?.decode(Int.self))
      } catch {
        await connector.closeAll()
        throw error
      }
    }

    // MARK: - connect_timeout

    /// A server that accepts the TCP connection and then says nothing: `connect_timeout=2`
    /// is the bound that ends the wait, not Liaison's own (30 seconds).
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func connectTimeoutBoundsAServerThatDoesNotAnswer() async throws {
      let silent = socket(AF_INET, streamSocketType, 0)
      try #require(silent >= 0)
      defer { close(silent) }
      var address = loopback(port: 0)
      try #require(bindSocket(silent, &address) == 0 && listen(silent, 8) == 0)
      let port = try boundPort(silent)
      let error = await failure("postgres://liaison@127.0.0.1:\(port)/liaison?sslmode=disable&connect_timeout=2")
      #expect(error?.code == .unavailable, "\(String(describing: error))")
      // The bound that ended the wait is the URL's 2 s, not Liaison's own 30 s (the error names it).
      #expect(error?.message.contains("Connect timeout (2 s)") == true, "\(String(describing: error))")
    }
  }

  /// A TCP port on 127.0.0.1 that nothing listens on (one just bound and released).
  func closedLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, streamSocketType, 0)
    guard descriptor >= 0 else { throw TestInfrastructureError("socket: errno \(errno)") }
    defer { close(descriptor) }
    var address = loopback(port: 0)
    guard bindSocket(descriptor, &address) == 0 else { throw TestInfrastructureError("bind: errno \(errno)") }
    return try boundPort(descriptor)
  }

  private func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
  }

  #if os(Linux)
    private let streamSocketType = Int32(SOCK_STREAM.rawValue)
  #else
    private let streamSocketType = SOCK_STREAM
  #endif

  private func bindSocket(_ descriptor: CInt, _ address: inout sockaddr_in) -> CInt {
    withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
  }

  private func boundPort(_ descriptor: CInt) throws -> Int {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let result = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    guard result == 0 else { throw TestInfrastructureError("getsockname: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
  }
#endif
