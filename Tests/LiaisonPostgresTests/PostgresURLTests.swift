#if Postgres
  import Foundation
  import Liaison
  import LiaisonTestSupport
  import Testing

  @testable import LiaisonPostgres

  /// How a `postgres://` URL is read: every part checked, and a wrong part named rather than
  /// read as something else (a truncated port, an IPv6 address looked up as a name).
  @Suite("PostgreSQL URLs")
  struct PostgresURLTests {
    /// The message of the error that reading `text` throws, or `nil` when it reads.
    func problem(_ text: String) -> String? {
      do throws(LiaisonError) {
        _ = try PostgresURL(text)
        return nil
      } catch {
        #expect(error.code == .invalidArgument)
        return error.message
      }
    }

    /// A setting out of its range is refused before anything connects, naming the setting and
    /// the range (the URL points at a port nothing listens on: nothing is tried).
    @Test func aConfigurationOutOfItsRangeIsRefused() async {
      func refusal(_ configuration: PostgresContainer.Configuration) async -> LiaisonError? {
        do throws(LiaisonError) {
          let place = try await PostgresContainer(
            url: "postgres://app@127.0.0.1:1/app", namespace: "settings", configuration: configuration)
          await place.close()
          return nil
        } catch {
          return error
        }
      }
      let short = await refusal(.init(detectionBound: .seconds(1)))
      #expect(short?.code == .invalidArgument && short?.message.contains("give 2 seconds or more") == true)
      let negative = await refusal(.init(maximumIdleConnections: -1))
      #expect(negative?.code == .invalidArgument && negative?.message.contains("give 0 or more") == true)
    }

    @Test func everyPartIsRead() throws {
      let url = try PostgresURL("postgresql://app%40corp:p%3Ass%2Fw@db.example.com:6543/my%20db?sslmode=require")
      #expect(url.user == "app@corp" && url.password == "p:ss/w")
      #expect(url.server == .host("db.example.com") && url.port == 6543)
      #expect(url.database == "my db" && url.sslMode == "require")

      let plain = try PostgresURL("postgres://app@10.0.0.7/app")
      #expect(plain.server == .host("10.0.0.7") && plain.port == 5432 && plain.password == nil)
      #expect(plain.sslMode == "prefer")
      #expect(try PostgresURL("postgres://app@db").database == "app")
      let socket = try PostgresURL("postgres://app@:5433/app?host=/var/run/postgresql")
      #expect(socket.server == .socketFolder("/var/run/postgresql") && socket.port == 5433)
      // A password may hold a raw '@': the host follows the last one.
      #expect(try PostgresURL("postgres://app:p@ss@db/app").password == "p@ss")
    }

    /// A password with a raw '/' or '?' cuts the URL in the wrong place: it is refused, and the
    /// error never shows a part of it.
    @Test func aPasswordWithARawSlashOrQuestionMarkIsNeverShown() {
      for (text, secret) in [
        ("postgres://app:xq7/cd@db/app", "xq7"), ("postgres://app:pa:ss/x@db", "pa:ss"),
        ("postgres://app:s3cr?t@db/app", "s3cr"),
      ] {
        let message = problem(text)
        #expect(message?.contains("percent-encoded (%2F, %3F, %23, %40)") == true, "\(text): \(message ?? "read")")
        #expect(message?.contains(secret) == false, "\(text): \(message ?? "read")")
      }
    }

    /// `pool_mode` is Liaison's own: `session` (the default) or `transaction`; `statement`, and
    /// anything else, is refused, saying why.
    @Test func thePoolModeIsRead() throws {
      #expect(try PostgresURL("postgres://app@db/app").holdsAreLeases == false)
      #expect(try PostgresURL("postgres://app@db/app?pool_mode=session").holdsAreLeases == false)
      let pooled = try PostgresURL("postgres://app@db/app?pool_mode=transaction")
      #expect(pooled.holdsAreLeases)
      #expect(try pooled.connectionTargets().holdsAreLeases)
      #expect(problem("postgres://app@db/app?pool_mode=statement")?.contains("refuses") == true)
      #expect(problem("postgres://app@db/app?pool_mode=txn")?.contains("is not one of session, transaction") == true)
    }

    @Test func theTLSParametersAreRead() throws {
      let url = try PostgresURL(
        "postgres://app@db/app?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem&sslcert=/c.crt&sslkey=/c.key")
      #expect(url.sslMode == "verify-ca" && url.tls.rootCertificate == "/etc/ca.pem")
      #expect(url.tls.certificate == "/c.crt" && url.tls.key == "/c.key")
      for mode in ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] {
        #expect(try PostgresURL("postgres://app@db/app?sslmode=\(mode)").sslMode == mode)
      }
      // As in libpq 16: the system's roots make verify-full the default, and the only mode allowed.
      #expect(try PostgresURL("postgres://app@db/app?sslrootcert=system").sslMode == "verify-full")
    }

    /// The TLS files are read when the configuration is made: a missing one is named, and
    /// `~/.postgresql` is where libpq looks for the defaults.
    @Test func aMissingTLSFileIsNamed() throws {
      func configurationError(_ text: String) -> LiaisonError? {
        PostgresTLS.$homeOverride.withValue("/nonexistent-home") {
          do throws(LiaisonError) {
            _ = try PostgresURL(text).configuration()
            return nil
          } catch {
            return error
          }
        }
      }
      let missingRoot = configurationError("postgres://app@db/app?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
      #expect(missingRoot?.message.contains("the certificate file /nonexistent/ca.pem: there is no such file") == true)
      let noRoot = configurationError("postgres://app@db/app?sslmode=verify-full")
      #expect(noRoot?.message.contains("/nonexistent-home/.postgresql/root.crt does not exist") == true)
      #expect(noRoot?.path == "/nonexistent-home/.postgresql/root.crt")
      let keyAlone = configurationError("postgres://app@db/app?sslmode=require&sslkey=/c.key")
      #expect(keyAlone?.message.contains("sslkey (/c.key) is given without a client certificate") == true)
      #expect(configurationError("postgres://app@db/app?sslmode=require") == nil)
      #expect(configurationError("postgres://app@db/app?sslmode=disable&sslrootcert=/nonexistent/ca.pem") == nil)
    }

    @Test func anIPv6AddressInBracketsIsAnAddress() throws {
      let loopback = try PostgresURL("postgres://app@[::1]:55433/app")
      #expect(loopback.server == .host("::1") && loopback.port == 55433)
      #expect(try PostgresURL("postgres://app@[2001:db8::7]/app").server == .host("2001:db8::7"))
      #expect(try PostgresURL("postgres://app@[fe80::1%25eth0]/app").server == .host("fe80::1%eth0"))
      #expect(
        problem("postgres://app@[db.example.com]/app")?.contains("the host '[db.example.com]' is not an IPv6") == true)
      #expect(problem("postgres://app@[::1/app")?.contains("opens a '[' it does not close") == true)
      #expect(problem("postgres://app@[::1]x/app")?.contains("where only :PORT may") == true)
      #expect(problem("postgres://app@::1/app")?.contains("write an IPv6 address in brackets") == true)
    }

    @Test func thePortIsANumberFrom1To65535() {
      // 120969 used to be truncated to 16 bits: a server on 55433.
      for port in ["120969", "65536", "0", "-1", "+5432", "54x", " 5432", "99999999999999999999999"] {
        #expect(
          problem("postgres://app@db:\(port)/app")?.contains("the port '\(port)' is not a number from 1 to 65535")
            == true, "\(port)")
      }
      #expect(problem("postgres://app@db:/app")?.contains("the port after ':' is empty") == true)
      #expect(problem("postgres://app@[::1]:/app")?.contains("the port after ':' is empty") == true)
      #expect(problem("postgres://app@[::1]:0/app")?.contains("the port '0'") == true)
      #expect((try? PostgresURL("postgres://app@db:1/app"))?.port == 1)
      #expect((try? PostgresURL("postgres://app@db:65535/app"))?.port == 65535)
    }

    @Test func eachWrongPartIsNamed() {
      let cases: [(String, String)] = [
        ("db.internal/app", "it does not start with postgres:// or postgresql://"),
        ("mysql://app@db/app", "it does not start with postgres://"),
        ("postgres://db/app", "it names no user"),
        ("postgres://:secret@db/app", "it names no user"),
        ("postgres://app@db%20x/app", "the host 'db x' is not a host name or IP address"),
        ("postgres://app@db1,db%202/app", "the host 'db 2' is not a host name"),
        ("postgres://app@db1,db2:0/app", "the port '0' is not a number from 1 to 65535"),
        ("postgres://app@db1,db2/app?port=1,2,3", "it gives 3 ports for 2 hosts"),
        ("postgres://a%zzpp@db/app", "the user name has a '%' that two hexadecimal digits do not follow"),
        ("postgres://app:se%2@db/app", "the password has a '%' that two hexadecimal digits do not follow"),
        ("postgres://app:%00@db/app", "the password holds %00"),
        ("postgres://app@db/a%ffb", "the database name is not UTF-8 once percent-decoded"),
        ("postgres://app@db/app?sslmode", "the parameter 'sslmode' has no value"),
        (
          "postgres://app@db/app?sslmode=verify-fool",
          "sslmode 'verify-fool' is not one of disable, allow, prefer, require, verify-ca, verify-full"
        ),
        (
          "postgres://app@db/app?sslrootcert=system&sslmode=require",
          "sslmode 'require' is too weak for sslrootcert=system"
        ),
        ("postgres://app@db/app?sslrootcert=system&sslmode=verify-ca", "sslmode 'verify-ca' is too weak"),
        ("postgres://app@db/app?sslpassword=x", "the parameter 'sslpassword' is not one Liaison reads"),
        ("postgres://app@db/app?options=-cx", "the parameter 'options' is not one Liaison reads"),
        ("postgres://app@db/app?host=db%20x", "the host 'db x' is not a host name"),
        ("postgres://app@db/app?connect_timeout=ten", "connect_timeout 'ten' is not a whole number"),
        ("postgres://app@db/app?target_session_attrs=master", "target_session_attrs 'master' is not one of any"),
        ("postgres://app@db/app#x", "it has a fragment"),
      ]
      for (url, expected) in cases {
        let message = problem(url)
        #expect(message?.contains(expected) == true, "\(url): \(message ?? "read")")
        #expect(message?.hasPrefix("The PostgreSQL URL is not usable: ") == true)
      }
      // A password is never shown.
      #expect(problem("postgres://app:hunter%2@db/app")?.contains("hunter") == false)
    }
  }

  /// How the environment, the user and the password file fill what a URL leaves out, as libpq
  /// fills it: each read from a dictionary and a file reader the test gives, never from this
  /// process's environment.
  @Suite("PostgreSQL URLs with libpq's environment")
  struct PostgresURLEnvironmentTests {
    /// An environment of `variables`, the user `os-user` at home in `/home/os-user`, and a
    /// password file of `passwordFile` wherever it is looked for (none when `nil`).
    func environment(_ variables: [String: String] = [:], passwordFile: String? = nil) -> ConnectionEnvironment {
      ConnectionEnvironment(
        variables: variables, userName: "os-user", homeDirectory: "/home/os-user",
        readPasswordFile: { _ throws(LiaisonError) in passwordFile })
    }

    /// The message of the error that reading `text` with `environment` throws, or `nil`.
    func problem(_ text: String, _ environment: ConnectionEnvironment) -> String? {
      do throws(LiaisonError) {
        _ = try PostgresURL(text, environment: environment)
        return nil
      } catch {
        return error.message
      }
    }

    @Test func aURLWithNothingInItTakesLibpqsDefaults() throws {
      for text in ["postgres://", "postgresql:///", "postgres://@/"] {
        let url = try PostgresURL(text, environment: environment())
        #expect(url.user == "os-user" && url.database == "os-user" && url.password == nil, "\(text)")
        #expect(url.hosts == [.init(server: .socketFolder(PostgresURL.defaultSocketFolder), port: 5432)])
        #expect(url.applicationName == "liaison" && url.connectTimeout == nil && url.sslMode == "prefer")
        #expect(url.targetSessionAttributes == .any)
      }
      #if os(Linux)
        #expect(PostgresURL.defaultSocketFolder == "/var/run/postgresql")
      #endif
      // This process's user, as libpq takes it (from the user database, not $USER).
      #expect(ConnectionEnvironment.current.userName == NSUserName())
      // Without a user name anywhere: an error that says where one goes.
      #expect(problem("postgres://db", .empty)?.contains("it names no user, and neither does $PGUSER") == true)
    }

    @Test func theEnvironmentFillsWhatTheURLLeavesOutAndTheURLWins() throws {
      let variables = [
        "PGHOST": "env-host", "PGPORT": "6000", "PGUSER": "env-user", "PGPASSWORD": "env-secret",
        "PGDATABASE": "env-db", "PGSSLMODE": "disable", "PGAPPNAME": "env-app", "PGCONNECT_TIMEOUT": "7",
        "PGTARGETSESSIONATTRS": "read-write",
      ]
      let filled = try PostgresURL("postgres://", environment: environment(variables))
      #expect(filled.user == "env-user" && filled.database == "env-db" && filled.password == "env-secret")
      #expect(
        filled.hosts == [
          .init(
            server: .host("env-host"), port: 6000, password: "env-secret",
            passwordSource: "$PGPASSWORD")
        ])
      #expect(filled.sslMode == "disable" && filled.applicationName == "env-app" && filled.connectTimeout == 7)
      #expect(filled.targetSessionAttributes == .readWrite)

      let given = try PostgresURL(
        "postgres://u:url-secret@h:5433/d?sslmode=require&application_name=url-app&connect_timeout=9"
          + "&target_session_attrs=any",
        environment: environment(variables))
      #expect(given.user == "u" && given.database == "d" && given.password == "url-secret")
      #expect(given.hosts == [.init(server: .host("h"), port: 5433, password: "url-secret", passwordSource: "the URL")])
      #expect(given.sslMode == "require" && given.applicationName == "url-app" && given.connectTimeout == 9)
      #expect(given.targetSessionAttributes == .any)

      // A parameter wins over the part before the '?', as in libpq; an empty variable is unset.
      let parameters = try PostgresURL(
        "postgres://u@h:1/d?user=p&dbname=q&host=other&port=2&password=x",
        environment: environment(["PGHOST": "", "PGUSER": ""]))
      #expect(parameters.user == "p" && parameters.database == "q" && parameters.password == "x")
      #expect(parameters.server == .host("other") && parameters.port == 2)
      #expect(try PostgresURL("postgres://", environment: environment(["PGUSER": ""])).user == "os-user")
      // fallback_application_name counts only when nothing names the application.
      #expect(
        try PostgresURL("postgres://h?fallback_application_name=tool", environment: environment())
          .applicationName == "tool")
      #expect(
        try PostgresURL("postgres://h?fallback_application_name=tool", environment: environment(variables))
          .applicationName == "env-app")
    }

    @Test func aWrongVariableIsNamed() {
      let cases: [(String, String, String)] = [
        ("PGPORT", "54x", "The environment variable PGPORT is not usable: the port '54x' is not a number"),
        ("PGPORT", "1,2,3", "The environment variable PGPORT is not usable: it gives 3 ports for 1 hosts"),
        ("PGHOST", "db x", "The environment variable PGHOST is not usable: the host 'db x' is not a host name"),
        ("PGHOST", "1:2:zz", "The environment variable PGHOST is not usable: the host '1:2:zz' is not a host name"),
        ("PGSSLMODE", "verify-fool", "The environment variable PGSSLMODE is not usable: sslmode 'verify-fool'"),
        ("PGCONNECT_TIMEOUT", "soon", "PGCONNECT_TIMEOUT is not usable: connect_timeout 'soon' is not a whole"),
        ("PGTARGETSESSIONATTRS", "master", "PGTARGETSESSIONATTRS is not usable: target_session_attrs 'master'"),
      ]
      for (name, value, expected) in cases {
        let message = problem("postgres://", environment([name: value]))
        #expect(message?.contains(expected) == true, "\(name)=\(value): \(message ?? "read")")
        #expect(message?.contains("Fix it or unset it") == true)
      }
      // The URL's own value wins, so the variable's is never read.
      #expect(problem("postgres://h:5432", environment(["PGPORT": "54x"])) == nil)
    }

    @Test func severalHostsAreReadInOrderWithTheirPorts() throws {
      let url = try PostgresURL(
        "postgres://u@h1:5432,h2:5433,[::1],%2Ftmp%2Fpg/d?target_session_attrs=read-write", environment: environment())
      #expect(url.hosts.map(\.server) == [.host("h1"), .host("h2"), .host("::1"), .socketFolder("/tmp/pg")])
      #expect(url.hosts.map(\.port) == [5432, 5433, 5432, 5432])
      #expect(url.targetSessionAttributes == .readWrite)

      let variables = try PostgresURL("postgres:///d", environment: environment(["PGHOST": "a,,::1", "PGPORT": "6"]))
      #expect(
        variables.hosts.map(\.server) == [.host("a"), .socketFolder(PostgresURL.defaultSocketFolder), .host("::1")])
      #expect(variables.hosts.map(\.port) == [6, 6, 6])
      let paired = try PostgresURL("postgres:///d", environment: environment(["PGHOST": "a,b", "PGPORT": "1,2"]))
      #expect(paired.hosts.map(\.port) == [1, 2])

      let targets = try url.connectionTargets()
      #expect(targets.targets.map(\.name) == ["h1:5432", "h2:5433", "[::1]:5432", "/tmp/pg/.s.PGSQL.5432"])
      #expect(targets.sessionAttributes == .readWrite && targets.connectTimeoutSeconds == nil)
      for target in targets.targets {
        let names = target.configuration.options.additionalStartupParameters.filter { $0.0 == "application_name" }
        #expect(names.map(\.1) == ["liaison"])
      }
    }

    @Test func connectTimeoutIsLibpqs() throws {
      func timeout(_ value: String) throws -> Int? {
        try PostgresURL("postgres://h?connect_timeout=\(value)", environment: environment()).connectTimeout
      }
      #expect(try timeout("10") == 10)
      #expect(try timeout("1") == 2)  // libpq's minimum
      #expect(try timeout("0") == nil)  // libpq: no limit; Liaison: its own bound
      #expect(try timeout("-5") == nil)
      let targets = try PostgresURL("postgres://h?connect_timeout=3", environment: environment()).connectionTargets()
      #expect(targets.connectTimeoutSeconds == 3)
    }

    @Test func thePasswordComesFromTheURLThenPGPASSWORDThenThePasswordFile() throws {
      let file = "*:*:*:*:from-file\n"
      // The password file is not read when a password is given: a reader that fails shows it.
      let failingReader = ConnectionEnvironment(
        variables: ["PGPASSWORD": "from-variable"], userName: "os-user", homeDirectory: "/home/os-user",
        readPasswordFile: { path throws(LiaisonError) in throw LiaisonError(.system, "read \(path)") })
      #expect(try PostgresURL("postgres://u:from-url@h", environment: failingReader).password == "from-url")
      #expect(try PostgresURL("postgres://u@h", environment: failingReader).password == "from-variable")
      let fromFile = try PostgresURL("postgres://u@h", environment: environment(passwordFile: file))
      #expect(fromFile.password == "from-file")
      #expect(fromFile.hosts[0].passwordSource == "the password file \"/home/os-user/.pgpass\"")
      // $PGPASSFILE, then $HOME, then the user's home folder.
      #expect(environment(["PGPASSFILE": "/etc/p", "HOME": "/h"]).passwordFilePath == "/etc/p")
      #expect(environment(["HOME": "/h/"]).passwordFilePath == "/h/.pgpass")
      #expect(environment().passwordFilePath == "/home/os-user/.pgpass")
      // No file, or no line for the server: no password.
      #expect(try PostgresURL("postgres://u@h", environment: environment()).password == nil)
      let other = try PostgresURL("postgres://u@h", environment: environment(passwordFile: "elsewhere:*:*:*:x\n"))
      #expect(other.password == nil && other.hosts[0].passwordSource == nil)
    }

    @Test func thePasswordFileIsMatchedAsLibpqMatchesIt() throws {
      let text = """
        # a comment: *:*:*:*:never
        db1:5432:app:alice:first
        db1:*:*:alice:second
        db\\:x:5432:*:*:escaped\\:colon\\\\back:ignored after a colon
        localhost:5433:*:*:socket
        /tmp/other:5433:*:*:other-socket
        short:line\r
        \\*:*:*:*:a-literal-star-host
        *:6000:*:bob:wild\r
        """
      let file = PasswordFile(text)
      #expect(file.password(host: "db1", port: 5432, database: "app", user: "alice") == "first")
      #expect(file.password(host: "db1", port: 5433, database: "app", user: "alice") == "second")
      #expect(file.password(host: "db1", port: 5432, database: "app", user: "bob") == nil)
      #expect(file.password(host: "db:x", port: 5432, database: "d", user: "u") == "escaped:colon\\back")
      #expect(file.password(host: "*", port: 1, database: "d", user: "u") == "a-literal-star-host")
      #expect(file.password(host: "any", port: 6000, database: "d", user: "bob") == "wild")
      #expect(file.password(host: "any", port: 6000, database: "d", user: "carol") == nil)
      #expect(file.password(host: "#", port: 1, database: "d", user: "u") == nil)

      // Each host is looked up on its own; the default socket folder is `localhost`.
      let url = try PostgresURL(
        "postgres://u@db1:5433,,%2Ftmp%2Fother:5433/app?port=5433", environment: environment(passwordFile: text))
      #expect(url.hosts.map(\.password) == [nil, "socket", "other-socket"])
      let alice = try PostgresURL("postgres://alice@db1,db1:5433/app", environment: environment(passwordFile: text))
      #expect(alice.hosts.map(\.password) == ["first", "second"])
    }

    /// The password file as this process reads it: one that others may read is refused with
    /// libpq's message; a missing one or one that is not a regular file is passed over.
    @Test func aPasswordFileThatOthersMayReadIsRefused() throws {
      let directory = TemporaryDirectory()
      let path = directory.path + "/pgpass"
      try writePrivateFile(path, "*:*:*:*:secret\n")
      #expect(try ConnectionEnvironment.readPasswordFile(at: path) == "*:*:*:*:secret\n")

      for mode: mode_t in [0o644, 0o640, 0o604, 0o610] {
        try setPermissions(path, mode)
        let error = #expect(throws: LiaisonError.self) { try ConnectionEnvironment.readPasswordFile(at: path) }
        #expect(error?.code == .unsafeFile)
        #expect(
          error?.message.contains(
            "password file \"\(path)\" has group or world access; permissions should be u=rw (0600) or less") == true)
        #expect(error?.message.contains("chmod 0600") == true && error?.message.contains("secret") == false)
      }
      // And through a URL that needs it.
      try setPermissions(path, 0o644)
      let environment = ConnectionEnvironment(
        variables: ["PGPASSFILE": path], userName: "u", homeDirectory: nil,
        readPasswordFile: { path throws(LiaisonError) in try ConnectionEnvironment.readPasswordFile(at: path) })
      #expect(problem("postgres://u@h/d", environment)?.contains("has group or world access") == true)
      #expect(problem("postgres://u:given@h/d", environment) == nil)

      // A link to a file of one's own is followed; a missing file, a folder or a FIFO is nothing.
      try setPermissions(path, 0o600)
      try plantSymbolicLink(at: directory.path + "/link", to: path)
      #expect(try ConnectionEnvironment.readPasswordFile(at: directory.path + "/link") == "*:*:*:*:secret\n")
      #expect(try ConnectionEnvironment.readPasswordFile(at: directory.path + "/missing") == nil)
      #expect(try ConnectionEnvironment.readPasswordFile(at: directory.path) == nil)
      #expect(mkfifo(directory.path + "/fifo", 0o600) == 0)
      #expect(try ConnectionEnvironment.readPasswordFile(at: directory.path + "/fifo") == nil)
    }

    @Test(.enabled(if: geteuid() == 0, "needs root, to give a file to another user"))
    func aPasswordFileOfAnotherUserIsRefused() throws {
      let directory = TemporaryDirectory()
      let path = directory.path + "/pgpass"
      try writePrivateFile(path, "*:*:*:*:secret\n")
      try changeOwner(path, to: 65534)
      try plantSymbolicLink(at: directory.path + "/link", to: path)
      for candidate in [path, directory.path + "/link"] {
        let error = #expect(throws: LiaisonError.self) { try ConnectionEnvironment.readPasswordFile(at: candidate) }
        #expect(error?.code == .unsafeFile)
        #expect(error?.message.contains("belongs to another user (uid 65534)") == true, "\(error?.message ?? "")")
      }
    }
  }
#endif
