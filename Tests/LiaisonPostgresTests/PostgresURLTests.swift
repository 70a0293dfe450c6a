#if Postgres
  import Liaison
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

    @Test func everyPartIsRead() throws {
      let url = try PostgresURL("postgresql://app%40corp:p%3Ass%2Fw@db.example.com:6543/my%20db?sslmode=require")
      #expect(url.user == "app@corp" && url.password == "p:ss/w")
      #expect(url.server == .host("db.example.com") && url.port == 6543)
      #expect(url.database == "my db" && url.sslMode == "require")

      let plain = try PostgresURL("postgres://app@10.0.0.7/app")
      #expect(plain.server == .host("10.0.0.7") && plain.port == 5432 && plain.password == nil)
      #expect(plain.sslMode == "prefer")
      #expect(try PostgresURL("postgres://app@db").database == nil)
      let socket = try PostgresURL("postgres://app@:5433/app?host=/var/run/postgresql")
      #expect(socket.server == .socketFolder("/var/run/postgresql") && socket.port == 5433)
      // A password may hold a raw '@': the host follows the last one.
      #expect(try PostgresURL("postgres://app:p@ss@db/app").password == "p@ss")
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
            _ = try PostgresURL.configuration(text)
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
        ("postgres://app@/app", "it names no host"),
        ("postgres://app@db%20x/app", "the host 'db x' is not a host name or IP address"),
        ("postgres://app@db1,db2/app", "the host 'db1,db2' is not a host name"),
        ("postgres://a%zzpp@db/app", "the user name has a '%' that two hexadecimal digits do not follow"),
        ("postgres://app:se%2@db/app", "the password has a '%' that two hexadecimal digits do not follow"),
        ("postgres://app:%00@db/app", "the password holds %00"),
        ("postgres://app@db/a%ffb", "the database name is not UTF-8 once percent-decoded"),
        ("postgres://app@db/app?sslmode", "the parameter 'sslmode' has no value"),
        (
          "postgres://app@db/app?sslmode=verify-fool",
          "sslmode 'verify-fool' is not one of disable, allow, prefer, require, verify-ca, verify-full"
        ),
        ("postgres://app@db/app?sslrootcert=", "the parameter 'sslrootcert' is empty"),
        ("postgres://app@db/app?sslmode=require&sslkey=", "the parameter 'sslkey' is empty"),
        (
          "postgres://app@db/app?sslrootcert=system&sslmode=require",
          "sslmode 'require' is too weak for sslrootcert=system"
        ),
        ("postgres://app@db/app?sslrootcert=system&sslmode=verify-ca", "sslmode 'verify-ca' is too weak"),
        ("postgres://app@db/app?sslpassword=x", "the parameter 'sslpassword' is not one Liaison reads"),
        ("postgres://app@db/app?port=5", "the parameter 'port' is not one Liaison reads"),
        ("postgres://app@db/app?host=other", "the host parameter 'other' is not a Unix socket's folder"),
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
#endif
