import Foundation
import LiaisonTestSupport
import Testing

#if Postgres
  /// `liaison --postgres URL` and `$LIAISON_POSTGRES_URL` with libpq's conventions, across real
  /// `liaison` processes whose environment the tests set: a URL without a password, the password
  /// from `PGPASSWORD` or the password file, and a URL that leaves everything to `PG*` variables.
  @Suite("The liaison command with libpq's conventions")
  struct PostgresURLCommandTests {
    /// The password of ``server``'s superuser, with a `:` and a `\` for the password file to escape.
    static let password = "cli:p\\w-\(UInt64.random(in: 0...UInt64.max))"
    /// A server whose TCP connections need ``password``.
    static let server = Result { try PostgresTestServer.start(durable: false, password: password) }
    /// Every variable libpq reads: unset (empty) in each `liaison` unless a test sets it.
    static let libpqVariables = [
      "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSSLMODE", "PGAPPNAME", "PGCONNECT_TIMEOUT",
      "PGPASSFILE", "PGTARGETSESSIONATTRS",
    ]

    /// `$HOME` of every `liaison` (with no `.pgpass`), and `$LIAISON_CONTAINER`.
    let directory = TemporaryDirectory()
    let namespace = "cli-url-\(UInt32.random(in: 0...UInt32.max))"

    /// Runs `liaison ARGS` with `extra` over an environment of no PostgreSQL variables.
    func liaison(_ arguments: [String], _ extra: [String: String] = [:]) throws -> (
      status: Int32, output: String, errors: String
    ) {
      var environment = [
        "LIAISON_CONTAINER": directory.path, "LIAISON_POSTGRES_URL": "", "LIAISON_NAMESPACE": namespace,
        "HOME": directory.path,
      ]
      for name in Self.libpqVariables { environment[name] = "" }
      let child = try ChildProcess(
        liaisonPath, arguments, environment: environment.merging(extra) { $1 }, errors: .pipe)
      let (output, errors, termination) = child.finish()
      return (termination.shellStatus, output, errors)
    }

    /// A password file of `line`, mode 0600.
    func passwordFile(_ line: String) throws -> String {
      let path = directory.path + "/pgpass-\(UInt32.random(in: 0...UInt32.max))"
      try writePrivateFile(path, line + "\n")
      return path
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aURLWithoutAPasswordTakesItFromPGPASSWORDOrThePasswordFile() throws {
      let server = try Self.server.get()
      let url = "postgres://liaison@127.0.0.1:\(server.port)/liaison"

      let none = try liaison(["post", "s", "--state", "3", "--postgres", url])
      #expect(none.status != 0)
      #expect(none.errors.contains("No password was given: put it in the password file"), "\(none)")

      let byVariable = try liaison(["post", "s", "--state", "3", "--postgres", url], ["PGPASSWORD": Self.password])
      #expect(byVariable.status == 0, "\(byVariable)")

      let escaped = Self.password.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
        of: ":", with: "\\:")
      let file = try passwordFile("127.0.0.1:\(server.port):liaison:liaison:\(escaped)")
      let byFile = try liaison(["state", "s", "--postgres", url], ["PGPASSFILE": file])
      #expect(byFile.status == 0 && byFile.output == "3\n", "\(byFile)")

      try setPermissions(file, 0o644)
      let loose = try liaison(["state", "s", "--postgres", url], ["PGPASSFILE": file])
      #expect(loose.status != 0)
      #expect(
        loose.errors.contains(
          "password file \"\(file)\" has group or world access; permissions should be u=rw (0600) or less"),
        "\(loose)")
      #expect(!loose.errors.contains(Self.password) && !byVariable.errors.contains(Self.password))
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func theURLMayLeaveEverythingToPGVariablesAndWinsOverThem() throws {
      let server = try Self.server.get()
      let variables = [
        "PGHOST": "127.0.0.1", "PGPORT": "\(server.port)", "PGUSER": "liaison", "PGDATABASE": "liaison",
        "PGPASSWORD": Self.password,
      ]
      let byEnvironment = try liaison(
        ["post", "s", "--state", "4"], variables.merging(["LIAISON_POSTGRES_URL": "postgres://"]) { $1 })
      #expect(byEnvironment.status == 0, "\(byEnvironment)")

      // The URL's host and port win over PGHOST and PGPORT, which name no server.
      let url = "postgres://liaison@127.0.0.1:\(server.port)/liaison"
      let wins = try liaison(
        ["state", "s", "--postgres", url], variables.merging(["PGHOST": "no-such-host.invalid", "PGPORT": "1"]) { $1 })
      #expect(wins.status == 0 && wins.output == "4\n", "\(wins)")
    }
  }
#endif
