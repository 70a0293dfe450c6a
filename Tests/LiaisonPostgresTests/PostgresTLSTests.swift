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

  /// TLS as libpq does it, against real servers with throwaway certificates: each `sslmode`
  /// connects or fails as libpq's does, and a failure says what was wrong and what to do. Every
  /// connection check is a container opened at a URL, end to end.
  @Suite("PostgreSQL TLS")
  struct PostgresTLSTests {
    static let needs: Comment = "needs PostgreSQL (apt-get install postgresql) and openssl"

    /// The authority of the servers' certificates, and another that nobody trusts.
    static let authorities = Result { try (trusted: TestCertificateAuthority(), other: TestCertificateAuthority()) }

    /// A server that accepts only TLS over TCP, whose certificate names `localhost` only (not
    /// 127.0.0.1, where it listens).
    static let tlsServer = Result {
      let certificate = try authorities.get().trusted.issue("server", commonName: "localhost", dnsNames: ["localhost"])
      return try PostgresTestServer.start(tls: PostgresTestTLS(certificate: certificate, clients: .tlsRequired))
    }

    /// A server that asks for a client certificate signed by the client authority, with the
    /// user's name: `liaison`.
    static let certificateServer = Result {
      let certificate = try Self.authorities.get().trusted.issue(
        "server-for-clients", commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"])
      let clientRoot = try Self.clientAuthority.get().certificateFile
      return try PostgresTestServer.start(
        tls: PostgresTestTLS(certificate: certificate, clients: .certificateSignedBy(clientRoot)))
    }

    static let clientAuthority = Result { try TestCertificateAuthority(name: "Liaison Test Client CA") }

    /// A home folder for `~/.postgresql`, empty until a test fills it: no file of the machine's
    /// user changes what a test sees.
    final class Home {
      let folder: String
      init() throws {
        folder = NSTemporaryDirectory() + "liaison-home-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/.postgresql", withIntermediateDirectories: true)
      }
      deinit { try? FileManager.default.removeItem(atPath: folder) }

      /// Copies `source` to `~/.postgresql/name`, mode 0600.
      func put(_ source: String, as name: String) throws {
        try FileManager.default.copyItem(atPath: source, toPath: folder + "/.postgresql/" + name)
        #expect(chmod(folder + "/.postgresql/" + name, 0o600) == 0)
      }
    }

    /// The error of opening a container at `url` with `home` as the home folder, or `nil` when
    /// it opens (then it is closed).
    func openingError(_ url: String, home: Home) async throws -> LiaisonError? {
      do {
        try await PostgresTLS.$homeOverride.withValue(home.folder) {
          let place = try await PostgresContainer(url: url, namespace: "tls")
          await place.close()
        }
        return nil
      } catch let error as LiaisonError {
        return error
      }
    }

    /// `server`'s URL at `host` with the query `parameters`.
    func url(_ server: PostgresTestServer, host: String = "127.0.0.1", _ parameters: String) -> String {
      server.url(host: host) + "?" + parameters
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func disableIsRefusedByAServerThatAcceptsOnlyTLS() async throws {
      let server = try Self.tlsServer.get()
      let error = try await openingError(url(server, "sslmode=disable"), home: Home())
      #expect(error?.code == .unavailable)
      #expect(error?.message.contains("accepts only encrypted connections") == true, "\(String(describing: error))")
      #expect(error?.message.contains("rather than disable") == true)
    }

    /// `allow`, `prefer` and `require` encrypt, and check no certificate when no root is given:
    /// the server's certificate names neither 127.0.0.1 nor a root they trust.
    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func preferAndRequireEncryptWithoutCheckingTheCertificate() async throws {
      let server = try Self.tlsServer.get()
      for mode in ["allow", "prefer", "require"] {
        let error = try await openingError(url(server, "sslmode=\(mode)"), home: Home())
        #expect(error == nil, "\(mode): \(String(describing: error))")
      }
      // The default is prefer.
      #expect(try await openingError(server.url, home: Home()) == nil)

      // A server without TLS: prefer goes on unencrypted, require refuses.
      let plain = try PostgresTestServer.shared.get()
      #expect(try await openingError(url(plain, "sslmode=prefer"), home: Home()) == nil)
      let required = try await openingError(url(plain, "sslmode=require"), home: Home())
      #expect(required?.code == .unavailable)
      #expect(required?.message.contains("does not offer TLS") == true, "\(String(describing: required))")
    }

    /// As libpq does, a root certificate (given, or in `~/.postgresql/root.crt`) makes `require`
    /// check the chain, as `verify-ca` does.
    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func requireChecksTheChainWhenARootIsGiven() async throws {
      let server = try Self.tlsServer.get()
      let authorities = try Self.authorities.get()
      #expect(
        try await openingError(
          url(server, "sslmode=require&sslrootcert=\(authorities.trusted.certificateFile)"), home: Home()) == nil)
      let error = try await openingError(
        url(server, "sslmode=require&sslrootcert=\(authorities.other.certificateFile)"), home: Home())
      #expect(
        error?.message.contains("is not signed by a root this connection trusts") == true,
        "\(String(describing: error))")

      let home = try Home()
      try home.put(authorities.other.certificateFile, as: "root.crt")
      let fromHome = try await openingError(url(server, "sslmode=require"), home: home)
      #expect(fromHome?.message.contains("is not signed by a root") == true, "\(String(describing: fromHome))")
    }

    /// `verify-ca` checks the chain, not the host name: the certificate names `localhost`, and
    /// it connects to 127.0.0.1.
    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func verifyCAPassesWithTheRootAndFailsWithoutIt() async throws {
      let server = try Self.tlsServer.get()
      let authorities = try Self.authorities.get()
      let trusted = try await openingError(
        url(server, "sslmode=verify-ca&sslrootcert=\(authorities.trusted.certificateFile)"), home: Home())
      #expect(trusted == nil, "\(String(describing: trusted))")

      let home = try Home()
      let missing = try await openingError(url(server, "sslmode=verify-ca"), home: home)
      #expect(missing?.code == .invalidArgument)
      let message = missing?.message ?? ""
      #expect(
        message.contains("root certificate file \(home.folder)/.postgresql/root.crt does not exist"), "\(message)")
      #expect(message.contains("sslrootcert=/path/to/ca.pem") && message.contains("sslmode=require"))

      let other = try await openingError(
        url(server, "sslmode=verify-ca&sslrootcert=\(authorities.other.certificateFile)"), home: Home())
      #expect(other?.code == .unavailable)
      #expect(
        other?.message.contains("is not signed by a root this connection trusts") == true,
        "\(String(describing: other))")
      #expect(other?.message.contains("Give sslrootcert=") == true)

      try home.put(authorities.trusted.certificateFile, as: "root.crt")
      #expect(try await openingError(url(server, "sslmode=verify-ca"), home: home) == nil)
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func verifyFullChecksTheHostName() async throws {
      let server = try Self.tlsServer.get()
      let root = try Self.authorities.get().trusted.certificateFile
      let named = try await openingError(
        url(server, host: "localhost", "sslmode=verify-full&sslrootcert=\(root)"), home: Home())
      #expect(named == nil, "\(String(describing: named))")

      let error = try await openingError(url(server, "sslmode=verify-full&sslrootcert=\(root)"), home: Home())
      #expect(error?.code == .unavailable)
      let message = error?.message ?? ""
      #expect(message.contains("does not name the host '127.0.0.1'"), "\(message)")
      #expect(message.contains("sslmode=verify-ca"))

      // The system's roots do not include the throwaway authority.
      let system = try await openingError(url(server, host: "localhost", "sslrootcert=system"), home: Home())
      #expect(system?.message.contains("is not signed by a root") == true, "\(String(describing: system))")
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func aClientCertificateIsAcceptedWhenTheServerAsksForOne() async throws {
      let server = try Self.certificateServer.get()
      let root = try Self.authorities.get().trusted.certificateFile
      let client = try Self.clientAuthority.get().issue("client", commonName: "liaison")
      let withCertificate = try await openingError(
        url(
          server, "sslmode=verify-full&sslrootcert=\(root)&sslcert=\(client.certificateFile)&sslkey=\(client.keyFile)"),
        home: Home())
      #expect(withCertificate == nil, "\(String(describing: withCertificate))")

      // libpq's default files: ~/.postgresql/postgresql.crt and .key.
      let home = try Home()
      try home.put(client.certificateFile, as: "postgresql.crt")
      try home.put(client.keyFile, as: "postgresql.key")
      let fromHome = try await openingError(url(server, "sslmode=require"), home: home)
      #expect(fromHome == nil, "\(String(describing: fromHome))")

      let without = try await openingError(url(server, "sslmode=verify-full&sslrootcert=\(root)"), home: Home())
      #expect(without?.code == .unavailable)
      #expect(without?.message.contains("asks for a client certificate") == true, "\(String(describing: without))")
      #expect(without?.message.contains("sslcert=") == true)

      let stranger = try Self.authorities.get().other.issue("stranger", commonName: "liaison")
      let refused = try await openingError(
        url(server, "sslmode=require&sslcert=\(stranger.certificateFile)&sslkey=\(stranger.keyFile)"), home: Home())
      #expect(refused?.code == .unavailable)
      #expect(refused?.message.contains("refused the client certificate") == true, "\(String(describing: refused))")
    }

    /// libpq's rule: a key that the group or others may read is refused (0600 or less, or 0640
    /// or less when root owns it, so that a group may share a system-wide key; these tests run as
    /// root, hence the modes that even root may not use).
    @Test(.enabled(if: PostgresTestServer.mustRun, needs))
    func aKeyFileOthersMayReadIsRefused() async throws {
      let server = try Self.certificateServer.get()
      let client = try Self.clientAuthority.get().issue("loose-client", commonName: "liaison")
      for mode: mode_t in [0o644, 0o660, 0o604] {
        #expect(chmod(client.keyFile, mode) == 0)
        let error = try await openingError(
          url(server, "sslmode=require&sslcert=\(client.certificateFile)&sslkey=\(client.keyFile)"), home: Home())
        #expect(error?.code == .unsafeFile, "\(String(format: "%o", mode))")
        #expect(
          error?.message.contains(
            "private key file \(client.keyFile) has group or world access; file must have permissions u=rw (0600) "
              + "or less if owned by the current user, or permissions u=rw,g=r (0640) or less if owned by root")
            == true, "\(String(describing: error))")
      }
      #expect(chmod(client.keyFile, 0o400) == 0)
      let strict = try await openingError(
        url(server, "sslmode=require&sslcert=\(client.certificateFile)&sslkey=\(client.keyFile)"), home: Home())
      #expect(strict == nil, "\(String(describing: strict))")
    }
  }
#endif
