#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// A `postgres://` (or `postgresql://`) URL, read as libpq reads it, with the environment:
  ///
  ///     postgres://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]...]][/DATABASE][?NAME=VALUE&...]
  ///
  /// HOST is a host name, an IPv4 address, an IPv6 address in brackets (`[::1]`), or a Unix
  /// socket's folder, percent-encoded (`%2Fvar%2Frun%2Fpostgresql`); PORT is a number from 1 to
  /// 65535; every part may be percent-encoded (`%40` for `@`). The parameters are those of
  /// ``parameters`` (the TLS ones are read by ``PostgresTLS``); a parameter wins over the same
  /// part before the `?`, as in libpq.
  ///
  /// What the URL leaves out comes from the environment (see ``variables``): `PGHOST`, `PGPORT`,
  /// `PGUSER`, `PGPASSWORD`, `PGDATABASE`, …; then the password file (`~/.pgpass` or
  /// `$PGPASSFILE`) for the password; then the defaults: the user this process runs as, the
  /// database named as the user, port 5432, and the default Unix socket folder
  /// (``defaultSocketFolder``). A part that breaks these rules is refused with a message that
  /// names the part (never the password itself), rather than read as something else: a port is
  /// never truncated, an IPv6 address never looked up as a name.
  struct PostgresURL: Equatable {
    /// Where the server listens.
    enum Server: Equatable {
      /// A host name or IP address (an IPv6 address without its brackets).
      case host(String)
      /// The folder of a Unix socket.
      case socketFolder(String)
    }

    /// One server of the list, tried in order.
    struct Host: Equatable {
      var server: Server
      /// 1 to 65535.
      var port: Int
      /// The password: the URL's or `$PGPASSWORD`, else the password file's for this server.
      var password: String?
      /// Where the password came from (see ``ConnectionTarget/passwordSource``).
      var passwordSource: String?
    }

    /// The user name, percent-decoded; never empty.
    var user: String
    /// The servers, in the order they are tried; never empty.
    var hosts: [Host]
    /// The database's name: the user's name when nothing names one (the server's default).
    var database: String
    /// One of ``PostgresTLS/modes``: `prefer` when the URL gives none (`verify-full` with
    /// `sslrootcert=system`).
    var sslMode: String { tls.mode }
    /// The TLS parameters.
    var tls: PostgresTLS.Settings
    /// The `application_name` the server shows in `pg_stat_activity`: `liaison` by default.
    var applicationName: String
    /// Seconds to wait for each server (`connect_timeout`, at least 2 as libpq makes it); `nil`
    /// for Liaison's own bound (none given, or 0).
    var connectTimeout: Int?
    /// What a server must be (`target_session_attrs`).
    var targetSessionAttributes: TargetSessionAttributes
    /// Liaison's own `pool_mode`: `transaction` when the endpoint is a pooler in transaction mode
    /// (PgBouncer's term), so that holds are leases rather than sessions (see ``ConnectionTargets/holdsAreLeases``).
    var holdsAreLeases: Bool

    /// The first server.
    var server: Server { hosts[0].server }
    /// The first server's port.
    var port: Int { hosts[0].port }
    /// The first server's password.
    var password: String? { hosts[0].password }

    /// The parameters a URL may carry.
    static let parameters = [
      "host", "port", "user", "password", "dbname", "sslmode", "sslrootcert", "sslcert", "sslkey", "application_name",
      "fallback_application_name", "connect_timeout", "target_session_attrs", "pool_mode",
    ]
    /// The environment variables read, by parameter, as libpq reads them.
    static let variables = [
      "host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD", "dbname": "PGDATABASE",
      "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT", "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY",
      "application_name": "PGAPPNAME", "connect_timeout": "PGCONNECT_TIMEOUT",
      "target_session_attrs": "PGTARGETSESSIONATTRS",
    ]

    /// The Unix socket folder used when nothing names a host: Debian's and Ubuntu's
    /// `/var/run/postgresql` on Linux, `/tmp` elsewhere (PostgreSQL's own default, which
    /// Homebrew and Postgres.app keep).
    static var defaultSocketFolder: String {
      #if os(Linux)
        "/var/run/postgresql"
      #else
        "/tmp"
      #endif
    }

    /// Reads `text` with nothing from the environment (the tests of the URL's own rules).
    init(_ text: String) throws(LiaisonError) {
      try self.init(text, environment: .empty)
    }

    /// Reads `text`, checking every part, and fills what it leaves out from `environment`.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, with a message that names the
    ///   part that is wrong (in the URL or in which variable) and shows how a URL is written;
    ///   ``/Liaison/LiaisonError/Code/unsafeFile`` for a password file that others may read.
    init(_ text: String, environment: ConnectionEnvironment) throws(LiaisonError) {
      do throws(Problem) {
        self = try Self.read(text, environment)
      } catch {
        throw error.error
      }
    }

    /// What reading a URL found wrong, and where.
    private enum Problem: Error {
      /// In the URL.
      case url(String)
      /// In the environment variable `name`.
      case variable(_ name: String, _ problem: String)
      /// Elsewhere (the password file).
      case other(LiaisonError)

      var error: LiaisonError {
        switch self {
        case .url(let problem): PostgresURL.invalid(problem)
        case .variable(let name, let problem):
          LiaisonError(
            .invalidArgument,
            "The environment variable \(name) is not usable: \(problem). Fix it or unset it (a part the "
              + "PostgreSQL URL gives wins over it).")
        case .other(let error): error
        }
      }
    }

    /// Where a value came from: the URL (before the `?` or a parameter) or a variable.
    private enum Source {
      case url
      case variable(String)

      func problem(_ text: String) -> Problem {
        switch self {
        case .url: .url(text)
        case .variable(let name): .variable(name, text)
        }
      }
    }

    private static func read(_ text: String, _ environment: ConnectionEnvironment) throws(Problem) -> PostgresURL {
      guard let separator = text.range(of: "://"), ["postgres", "postgresql"].contains(text[..<separator.lowerBound])
      else { throw .url("it does not start with postgres:// or postgresql://") }
      var rest = text[separator.upperBound...]
      if rest.contains("#") {
        throw .url("it has a fragment ('#...'), which a PostgreSQL URL does not take (write a '#' as %23)")
      }
      var query: Substring = ""
      if let questionMark = rest.firstIndex(of: "?") {
        query = rest[rest.index(after: questionMark)...]
        rest = rest[..<questionMark]
      }
      let slash = rest.firstIndex(of: "/") ?? rest.endIndex
      var authority = rest[..<slash]
      let path = slash == rest.endIndex ? "" : rest[rest.index(after: slash)...]

      var values: [String: String] = [:]
      if let at = authority.lastIndex(of: "@") {
        let userInfo = authority[..<at]
        if let colon = userInfo.firstIndex(of: ":") {
          values["user"] = try decode(userInfo[..<colon], "the user name")
          values["password"] = try decode(userInfo[userInfo.index(after: colon)...], "the password")
        } else {
          values["user"] = try decode(userInfo, "the user name")
        }
        authority = authority[authority.index(after: at)...]
      }
      // An '@' only after the first '/' or '?': most likely a password with a raw '/' or '?',
      // which the errors of the host and port must not show.
      let unencoded = !rest[..<slash].contains("@") && text[separator.upperBound...].contains("@")
      // HOST[:PORT],HOST[:PORT]: an empty host is the default one; ports only if one is given.
      if !authority.isEmpty {
        var hosts: [String] = []
        var ports: [String] = []
        do throws(Problem) {
          for item in authority.split(separator: ",", omittingEmptySubsequences: false) {
            let (host, port) = try hostAndPort(item)
            if let port { _ = try Self.port(port) }
            hosts.append(host ?? "")
            ports.append(port.map(String.init) ?? "")
          }
        } catch {
          guard unencoded else { throw error }
          throw .url(
            "its host and port cannot be read, and an '@' follows a '/' or '?': write a '/', '?', '#' or '@' in "
              + "the user name or password percent-encoded (%2F, %3F, %23, %40)")
        }
        values["host"] = hosts.joined(separator: ",")
        if ports.contains(where: { !$0.isEmpty }) { values["port"] = ports.joined(separator: ",") }
      }
      values["dbname"] = try decode(path, "the database name")

      for item in query.split(separator: "&", omittingEmptySubsequences: true) {
        guard let equals = item.firstIndex(of: "=") else {
          throw .url("the parameter '\(item)' has no value (write NAME=VALUE)")
        }
        let parameter = try decode(item[..<equals], "a parameter's name")
        guard Self.parameters.contains(parameter) else {
          throw .url(
            "the parameter '\(parameter)' is not one Liaison reads (\(Self.parameters.joined(separator: ", ")))")
        }
        values[parameter] = try decode(item[item.index(after: equals)...], "the parameter '\(parameter)'")
      }
      // What the URL leaves out (or leaves empty), the environment gives, as libpq.
      func value(_ parameter: String) -> (String, Source)? {
        if let value = values[parameter], !value.isEmpty { return (value, .url) }
        guard let name = variables[parameter], let value = environment[name] else { return nil }
        return (value, .variable(name))
      }

      guard let user = value("user")?.0 ?? environment.userName, !user.isEmpty else {
        throw .url(
          "it names no user, and neither does $PGUSER (nor could this process's user name be read): write "
            + "USER@ before the host")
      }
      let database = value("dbname")?.0 ?? user

      let tls: PostgresTLS.Settings
      do {
        tls = try PostgresTLS.Settings(
          mode: value("sslmode")?.0, rootCertificate: value("sslrootcert")?.0, certificate: value("sslcert")?.0,
          key: value("sslkey")?.0)
      } catch {
        let source = ["sslmode", "sslrootcert", "sslcert", "sslkey"].lazy.compactMap { value($0)?.1 }.first
        throw (source ?? .url).problem(error.message)
      }
      let applicationName = value("application_name")?.0 ?? values["fallback_application_name"] ?? "liaison"

      var connectTimeout: Int?
      if case (let text, let source)? = value("connect_timeout") {
        guard let seconds = Int(text.trimmingCharacters(in: .whitespaces)) else {
          throw source.problem("connect_timeout '\(text)' is not a whole number of seconds")
        }
        // As libpq: 0 or less waits as long as it takes (here: Liaison's own bound); 1 is 2.
        connectTimeout = seconds > 0 ? max(2, seconds) : nil
      }
      var sessionAttributes = TargetSessionAttributes.any
      if case (let text, let source)? = value("target_session_attrs") {
        guard let attributes = TargetSessionAttributes(rawValue: text) else {
          throw source.problem(
            "target_session_attrs '\(text)' is not one of "
              + TargetSessionAttributes.allCases.map(\.rawValue).joined(separator: ", "))
        }
        sessionAttributes = attributes
      }

      var holdsAreLeases = false
      if let text = values["pool_mode"] {
        switch text {
        case "session": holdsAreLeases = false
        case "transaction": holdsAreLeases = true
        case "statement":
          throw .url(
            "pool_mode 'statement' cannot be used: Liaison runs transactions of several statements, which a pooler "
              + "in statement mode refuses. Use the pooler in transaction or session mode")
        default:
          throw .url("pool_mode '\(text)' is not one of session, transaction")
        }
      }

      // The servers, each with its port: one port for all, or one per host.
      var servers: [Server] = []
      if case (let text, let source)? = value("host") {
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
          servers.append(try server(String(entry), source))
        }
      } else {
        servers = [.socketFolder(defaultSocketFolder)]
      }
      var ports: [Int] = []
      if case (let text, let source)? = value("port") {
        let entries = text.split(separator: ",", omittingEmptySubsequences: false)
        guard entries.count == 1 || entries.count == servers.count else {
          throw source.problem(
            "it gives \(entries.count) ports for \(servers.count) hosts: give one port for all, or one per host")
        }
        for entry in entries {
          do throws(Problem) {
            ports.append(try entry.isEmpty ? 5432 : port(entry))
          } catch {
            guard case .url(let problem) = error else { throw error }
            throw source.problem(problem)
          }
        }
      }
      if ports.count <= 1 { ports = Array(repeating: ports.first ?? 5432, count: servers.count) }

      var hosts = zip(servers, ports).map { Host(server: $0, port: $1) }
      if case (let password, let source)? = value("password") {
        let described: String
        switch source {
        case .url: described = "the URL"
        case .variable(let name): described = "$" + name
        }
        for index in hosts.indices {
          hosts[index].password = password
          hosts[index].passwordSource = described
        }
      } else if let path = environment.passwordFilePath {
        let text: String?
        do throws(LiaisonError) {
          text = try environment.readPasswordFile(path)
        } catch {
          throw .other(error)
        }
        if let text {
          let file = PasswordFile(text)
          for index in hosts.indices {
            let password = file.password(
              host: passwordFileHost(hosts[index].server), port: hosts[index].port, database: database, user: user)
            hosts[index].password = password
            hosts[index].passwordSource = password == nil ? nil : "the password file \"\(path)\""
          }
        }
      }
      return PostgresURL(
        user: user, hosts: hosts, database: database, tls: tls, applicationName: applicationName,
        connectTimeout: connectTimeout, targetSessionAttributes: sessionAttributes, holdsAreLeases: holdsAreLeases)
    }

    private init(
      user: String, hosts: [Host], database: String, tls: PostgresTLS.Settings, applicationName: String,
      connectTimeout: Int?,
      targetSessionAttributes: TargetSessionAttributes, holdsAreLeases: Bool
    ) {
      self.holdsAreLeases = holdsAreLeases
      self.user = user
      self.hosts = hosts
      self.database = database
      self.tls = tls
      self.applicationName = applicationName
      self.connectTimeout = connectTimeout
      self.targetSessionAttributes = targetSessionAttributes
    }

    /// How the password file names `server`: `localhost` for the default socket folder, as libpq.
    private static func passwordFileHost(_ server: Server) -> String {
      switch server {
      case .host(let name): name
      case .socketFolder(let folder): folder == defaultSocketFolder ? "localhost" : folder
      }
    }

    /// The server an entry of a host list names: empty for the default socket folder, a path
    /// from `/` for a socket folder, an IPv6 address with or without brackets, or a host name.
    private static func server(_ entry: String, _ source: Source) throws(Problem) -> Server {
      if entry.isEmpty { return .socketFolder(defaultSocketFolder) }
      if entry.hasPrefix("/") { return .socketFolder(entry) }
      var address = Substring(entry)
      if address.hasPrefix("[") && address.hasSuffix("]") { address = address.dropFirst().dropLast() }
      if address.contains(":") {
        guard isIPv6Address(address) else {
          throw source.problem("the host '\(entry)' is not a host name, an IP address or a socket folder")
        }
        return .host(String(address))
      }
      guard address.unicodeScalars.allSatisfy(isHostNameCharacter) else {
        throw source.problem(
          "the host '\(entry)' is not a host name, an IP address or a socket folder (a path from /): a host name "
            + "has letters, digits, '.', '-' and '_'")
      }
      return .host(entry)
    }

    /// Whether `text` is an IPv6 address, with a zone after `%` or not (`fe80::1%eth0`).
    private static func isIPv6Address(_ text: Substring) -> Bool {
      let withoutZone = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
      var bytes = in6_addr()
      return inet_pton(AF_INET6, String(withoutZone), &bytes) == 1
    }

    /// The servers to connect to, in order, with what libpq's parameters ask of them.
    func connectionTargets() throws(LiaisonError) -> ConnectionTargets {
      var targets: [ConnectionTarget] = []
      for host in hosts {
        var one = self
        one.hosts = [host]
        var configuration = try one.configuration()
        configuration.options.additionalStartupParameters.append(("application_name", applicationName))
        targets.append(ConnectionTarget(configuration: configuration, passwordSource: host.passwordSource))
      }
      return ConnectionTargets(
        targets: targets, sessionAttributes: targetSessionAttributes, connectTimeoutSeconds: connectTimeout,
        holdsAreLeases: holdsAreLeases)
    }

    /// The postgres-nio configuration that connects to the first server as this URL says.
    func configuration() throws(LiaisonError) -> PostgresConnection.Configuration {
      switch server {
      case .socketFolder(let folder):
        return PostgresConnection.Configuration(
          unixSocketPath: folder + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
      case .host(let host):
        return PostgresConnection.Configuration(
          host: host, port: port, username: user, password: password, database: database, tls: try tls.tls())
      }
    }

    // MARK: - The parts

    /// The host (`nil` when the URL names none) and the text of the port (`nil` when there is no
    /// `:`) in `text`, the part between the `@` and the path.
    private static func hostAndPort(_ text: Substring) throws(Problem) -> (host: String?, port: Substring?) {
      if text.hasPrefix("[") {
        guard let close = text.firstIndex(of: "]") else {
          throw .url("the host '\(text)' opens a '[' it does not close (write an IPv6 address as [::1])")
        }
        let address = try decode(text[text.index(after: text.startIndex)..<close], "the host")
        // An IPv6 address may carry a zone after '%' (written %25 in a URL): fe80::1%25eth0.
        let withoutZone = address.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, String(withoutZone), &bytes) == 1 else {
          throw .url("the host '[\(address)]' is not an IPv6 address (brackets hold only an IPv6 address)")
        }
        let after = text[text.index(after: close)...]
        guard after.isEmpty || after.hasPrefix(":") else {
          throw .url("after the host '[\(address)]' comes '\(after)', where only :PORT may")
        }
        return (address, after.isEmpty ? nil : after.dropFirst())
      }
      let parts = text.split(separator: ":", omittingEmptySubsequences: false)
      guard parts.count <= 2 else {
        throw .url("the host '\(text)' has more than one ':' (write an IPv6 address in brackets: [::1]:5432)")
      }
      let host = try decode(parts[0], "the host")
      // A Unix socket's folder, percent-encoded: postgres://%2Fvar%2Frun%2Fpostgresql/db.
      if host.hasPrefix("/") { return (host, parts.count == 2 ? parts[1] : nil) }
      guard host.unicodeScalars.allSatisfy(isHostNameCharacter) else {
        throw .url(
          "the host '\(host)' is not a host name or IP address (letters, digits, '.', '-' and '_'; an IPv6 "
            + "address in brackets)")
      }
      return (host.isEmpty ? nil : host, parts.count == 2 ? parts[1] : nil)
    }

    /// The port in `text`: a number from 1 to 65535.
    private static func port(_ text: Substring) throws(Problem) -> Int {
      guard !text.isEmpty else {
        throw .url("the port after ':' is empty (give one, or leave out the ':' for 5432)")
      }
      guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let port = Int(text),
        (1...65535).contains(port)
      else { throw .url("the port '\(text)' is not a number from 1 to 65535") }
      return port
    }

    /// `text` percent-decoded (`%40` is `@`).
    ///
    /// - Throws: when a `%` is not followed by two hexadecimal digits, when it encodes a NUL
    ///   byte, or when the bytes are not UTF-8; the message names the part (`what`) and never
    ///   shows its text, which may be a password.
    private static func decode(_ text: Substring, _ what: String) throws(Problem) -> String {
      func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
      }
      let encoded = Array(text.utf8)
      var bytes: [UInt8] = []
      var index = 0
      while index < encoded.count {
        guard encoded[index] == UInt8(ascii: "%") else {
          bytes.append(encoded[index])
          index += 1
          continue
        }
        guard index + 2 < encoded.count, let high = hexValue(encoded[index + 1]),
          let low = hexValue(encoded[index + 2])
        else {
          throw .url(
            "\(what) has a '%' that two hexadecimal digits do not follow (percent-encoding: write a '%' itself as %25)")
        }
        guard high != 0 || low != 0 else { throw .url("\(what) holds %00, a NUL byte, which PostgreSQL refuses") }
        bytes.append(high << 4 | low)
        index += 3
      }
      let decoded = String(decoding: bytes, as: UTF8.self)
      guard decoded.utf8.elementsEqual(bytes) else { throw .url("\(what) is not UTF-8 once percent-decoded") }
      return decoded
    }

    private static func isHostNameCharacter(_ scalar: Unicode.Scalar) -> Bool {
      switch scalar {
      case "a"..."z", "A"..."Z", "0"..."9", ".", "-", "_": true
      default: false
      }
    }

    /// The error for a URL whose `problem` is stated, with the URL's forms.
    private static func invalid(_ problem: String) -> LiaisonError {
      LiaisonError(
        .invalidArgument,
        "The PostgreSQL URL is not usable: \(problem). Write postgres://USER@HOST[:PORT][,HOST[:PORT]...]/DATABASE"
          + "[?NAME=VALUE&...], or postgres://USER@/DATABASE?host=/path/to/socket-folder for a Unix socket; leave the "
          + "password to $PGPASSWORD or ~/.pgpass.")
    }
  }
#endif
