#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// TLS for a PostgreSQL connection as libpq sets it up: the `sslmode`, `sslrootcert`, `sslcert`
  /// and `sslkey` parameters of a URL made into postgres-nio's TLS setting, and a failed
  /// handshake explained.
  ///
  /// | `sslmode` | encrypted | server's certificate checked |
  /// |---|---|---|
  /// | `disable` | never | — |
  /// | `allow`, `prefer` | when the server offers TLS | only when a root certificate is given |
  /// | `require` | always | only when a root certificate is given (then as `verify-ca`) |
  /// | `verify-ca` | always | signed by a trusted root |
  /// | `verify-full` | always | signed by a trusted root, and names the host |
  ///
  /// The trusted roots are `sslrootcert`'s file, the system's (`sslrootcert=system`, which only
  /// `verify-full` may use), or else `~/.postgresql/root.crt` when it exists. The client
  /// certificate is `sslcert` and `sslkey`, or else `~/.postgresql/postgresql.crt` and `.key` when
  /// they exist. `allow` is read as `prefer`: postgres-nio cannot first try without TLS.
  enum PostgresTLS {
    /// The home folder that `~/.postgresql` is in, for a test; otherwise `HOME`, or the user's
    /// home folder in the password database.
    @TaskLocal static var homeOverride: String?

    /// The `sslmode`s, strongest last.
    static let modes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

    /// The value of `sslrootcert` that names the system's trusted roots (as in libpq 16).
    static let systemRoots = "system"

    /// The settings read from a URL; the files are read by ``tls()``.
    struct Settings: Equatable {
      /// One of ``modes``.
      var mode: String
      /// `sslrootcert`: a file of PEM certificates, or ``systemRoots``.
      var rootCertificate: String?
      /// `sslcert`: the client's certificate (PEM).
      var certificate: String?
      /// `sslkey`: the client's private key (PEM, not encrypted).
      var key: String?

      /// Checks the parameters together (no file is read): `mode` is known, no path is empty,
      /// and `sslrootcert=system` comes only with `verify-full` (its default mode).
      ///
      /// - Parameter mode: `nil` when the URL gives none: `prefer`, or `verify-full` with
      ///   `sslrootcert=system`.
      /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` whose message is the problem
      ///   alone, for ``PostgresURL`` to put in its sentence.
      init(mode: String?, rootCertificate: String?, certificate: String?, key: String?) throws(LiaisonError) {
        for (name, value) in [("sslrootcert", rootCertificate), ("sslcert", certificate), ("sslkey", key)] {
          if value?.isEmpty == true {
            throw Self.invalid("the parameter '\(name)' is empty (give the path of a PEM file, or leave it out)")
          }
        }
        let isSystem = rootCertificate == PostgresTLS.systemRoots
        self.mode = mode ?? (isSystem ? "verify-full" : "prefer")
        guard PostgresTLS.modes.contains(self.mode) else {
          throw Self.invalid("sslmode '\(self.mode)' is not one of \(PostgresTLS.modes.joined(separator: ", "))")
        }
        if isSystem && self.mode != "verify-full" {
          throw Self.invalid(
            "sslmode '\(self.mode)' is too weak for sslrootcert=system: the system's roots trust any public "
              + "host, so the host name must be checked too (use sslmode=verify-full)")
        }
        self.rootCertificate = rootCertificate
        self.certificate = certificate
        self.key = key
      }

      /// postgres-nio's TLS setting for these parameters, with the files read and checked.
      ///
      /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when a file is missing, is not
      ///   PEM, or (`verify-ca`, `verify-full`) no root certificate is given and
      ///   `~/.postgresql/root.crt` does not exist; ``/Liaison/LiaisonError/Code/unsafeFile``
      ///   when the key file may be read by others. Each message names the file and the fix.
      func tls() throws(LiaisonError) -> PostgresConnection.Configuration.TLS {
        guard mode != "disable" else { return .disable }
        let verifies = mode.hasPrefix("verify-")
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        let home = PostgresTLS.homeFolder()
        var roots: [NIOSSLCertificate]?
        if let rootCertificate, rootCertificate != PostgresTLS.systemRoots {
          roots = try readCertificates(rootCertificate)
        } else if rootCertificate == nil, let home {
          roots = try readCertificatesIfPresent(home + "/.postgresql/root.crt")
        }
        if rootCertificate == PostgresTLS.systemRoots {
          configuration.trustRoots = .default
          configuration.certificateVerification = .fullVerification
        } else if let roots {
          configuration.trustRoots = .certificates(roots)
          configuration.certificateVerification = mode == "verify-full" ? .fullVerification : .noHostnameVerification
        } else if verifies {
          let file = home.map { $0 + "/.postgresql/root.crt" } ?? "~/.postgresql/root.crt"
          throw LiaisonError(
            .invalidArgument,
            "sslmode=\(mode) checks the server's certificate against trusted roots, and none is given: no "
              + "sslrootcert parameter, and the root certificate file \(file) does not exist. Give "
              + "sslrootcert=/path/to/ca.pem (the CA that signed the server's certificate; a managed service "
              + "publishes its CA bundle), sslrootcert=system for the system's trusted roots (with verify-full), "
              + "put the CA's certificate at \(file), or use sslmode=require to encrypt without checking.",
            path: file)
        }

        let defaultCertificate = home.map { $0 + "/.postgresql/postgresql.crt" }
        let certificateFile =
          certificate ?? defaultCertificate.flatMap { FileManager.default.fileExists(atPath: $0) ? $0 : nil }
        if let certificateFile {
          let keyFile = key ?? (home.map { $0 + "/.postgresql/postgresql.key" } ?? "~/.postgresql/postgresql.key")
          configuration.certificateChain = try readCertificates(certificateFile).map { .certificate($0) }
          configuration.privateKey = .privateKey(try readKey(keyFile, for: certificateFile))
        } else if let key {
          throw LiaisonError(
            .invalidArgument,
            "The parameter sslkey (\(key)) is given without a client certificate: give sslcert=/path/to/client.crt "
              + "as well, or leave sslkey out.",
            path: key)
        }

        let context: NIOSSLContext
        do {
          context = try NIOSSLContext(configuration: configuration)
        } catch {
          throw LiaisonError(
            .invalidArgument,
            "Could not set up TLS for the PostgreSQL connection: \(error). Check that sslcert and sslkey belong "
              + "together (the key is the certificate's).",
            cause: error)
        }
        return mode == "allow" || mode == "prefer" ? .prefer(context) : .require(context)
      }

      /// The error of a wrong parameter: its message is only `problem`, which ``PostgresURL`` puts
      /// in its sentence about the URL.
      private static func invalid(_ problem: String) -> LiaisonError {
        LiaisonError(.invalidArgument, problem)
      }
    }

    // MARK: - Files

    /// The certificates of the PEM file at `path`, or `nil` when there is no file there.
    private static func readCertificatesIfPresent(_ path: String) throws(LiaisonError) -> [NIOSSLCertificate]? {
      FileManager.default.fileExists(atPath: path) ? try readCertificates(path) : nil
    }

    /// The certificates of the PEM file at `path`.
    private static func readCertificates(_ path: String) throws(LiaisonError) -> [NIOSSLCertificate] {
      let bytes = try read(path, what: "certificate file")
      let certificates: [NIOSSLCertificate]
      do {
        certificates = try NIOSSLCertificate.fromPEMBytes(bytes)
      } catch {
        throw LiaisonError(
          .invalidArgument,
          "The certificate file \(path) is not PEM certificates (-----BEGIN CERTIFICATE-----): \(error). Give the "
            + "certificate in PEM form (openssl x509 -in FILE -inform DER -out FILE.pem converts a DER one).",
          path: path, cause: error)
      }
      guard !certificates.isEmpty else {
        throw LiaisonError(
          .invalidArgument, "The certificate file \(path) holds no certificate (-----BEGIN CERTIFICATE-----).",
          path: path)
      }
      return certificates
    }

    /// The private key of the PEM file at `path`, for the client certificate `certificate`,
    /// refused (as libpq does) when others may read it.
    private static func readKey(_ path: String, for certificate: String) throws(LiaisonError) -> NIOSSLPrivateKey {
      try checkKeyPermissions(path)
      let bytes = try read(path, what: "private key file")
      do {
        return try NIOSSLPrivateKey(bytes: bytes, format: .pem)
      } catch {
        throw LiaisonError(
          .invalidArgument,
          "The private key file \(path) (for the client certificate \(certificate)) is not an unencrypted PEM "
            + "private key: \(error). Give the key in PEM form, without a passphrase (openssl pkey -in FILE "
            + "-out FILE.key removes one).",
          path: path, cause: error)
      }
    }

    /// Refuses a key file that others may read, with libpq's rule: 0600 or less when this user
    /// owns it, 0640 or less when root does.
    static func checkKeyPermissions(_ path: String) throws(LiaisonError) {
      var info = stat()
      guard stat(path, &info) == 0 else {
        let error = currentErrno()
        throw LiaisonError(
          .invalidArgument,
          "Could not read the private key file \(path) (sslkey, or ~/.postgresql/postgresql.key beside "
            + "~/.postgresql/postgresql.crt): \(error). Give the path of the client certificate's key.",
          errno: error, path: path)
      }
      // Converted: the constants are `Int32` on some platforms, `mode_t` on others.
      guard info.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else {
        throw LiaisonError(.invalidArgument, "The private key file \(path) is not a regular file.", path: path)
      }
      // libpq's rule: a key root owns may be readable by its group, any other must be private.
      let loose =
        info.st_uid == 0
        ? info.st_mode & mode_t(S_IWGRP | S_IXGRP | S_IRWXO) != 0 : info.st_mode & mode_t(S_IRWXG | S_IRWXO) != 0
      if loose {
        throw LiaisonError(
          .unsafeFile,
          "The private key file \(path) has group or world access; file must have permissions u=rw (0600) or "
            + "less if owned by the current user, or permissions u=rw,g=r (0640) or less if owned by root. Run "
            + "chmod 600 \(path).",
          path: path)
      }
    }

    private static func read(_ path: String, what: String) throws(LiaisonError) -> [UInt8] {
      do {
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
      } catch {
        let exists = FileManager.default.fileExists(atPath: path)
        throw LiaisonError(
          .invalidArgument,
          "Could not read the \(what) \(path): "
            + (exists ? "\(error.localizedDescription)" : "there is no such file")
            + ". Check the path given in the URL (an absolute path is safest).",
          path: path, cause: error)
      }
    }

    /// The folder that holds `.postgresql`: ``homeOverride``, `HOME`, or the password database's.
    static func homeFolder() -> String? {
      if let homeOverride { return homeOverride }
      if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return home }
      return ConnectionEnvironment.current.homeDirectory
    }

    /// Whether `host` is an IPv4 or IPv6 address (with or without an IPv6 zone), which TLS's
    /// server name indication may not carry.
    static func isIPAddress(_ host: String) -> Bool {
      let address = String(host.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
      var v4 = in_addr()
      var v6 = in6_addr()
      return inet_pton(AF_INET, address, &v4) == 1 || inet_pton(AF_INET6, address, &v6) == 1
    }

    // MARK: - Handshakes

    /// The TLS failure in `error` (from connecting to `host`) explained, or `nil` when `error`
    /// is not about TLS: an untrusted certificate, a host name it does not name, a client
    /// certificate the server refused or needs, a server that does not offer TLS, or one that
    /// accepts only encrypted connections.
    static func connectFailure(_ error: any Error, host: String?) -> LiaisonError? {
      let server = host.map { "the server \($0)" } ?? "the server"
      guard let psql = error as? PSQLError else { return nil }
      if let info = psql.serverInfo {
        let message = info[.message] ?? ""
        guard info[.sqlState] == "28000" else { return nil }
        if message.contains("no encryption") {
          return LiaisonError(
            .unavailable,
            "Could not connect: \(server) accepts only encrypted connections from here (it said: \(message)). "
              + "Use sslmode=prefer, require, verify-ca or verify-full rather than disable.",
            cause: error)
        }
        if message.contains("certificate") {
          return LiaisonError(
            .unavailable,
            "Could not connect: \(server) asks for a client certificate that it trusts (it said: \(message)). Give "
              + "sslcert=/path/to/client.crt and sslkey=/path/to/client.key, a certificate signed by a CA the "
              + "server trusts (its ssl_ca_file) whose common name is the user's name.",
            cause: error)
        }
        return nil
      }
      if psql.code == .sslUnsupported {
        return LiaisonError(
          .unavailable,
          "Could not connect: \(server) does not offer TLS, and the sslmode asks for it. Turn TLS on at the server "
            + "(ssl=on), or use sslmode=prefer, which goes on unencrypted.",
          cause: error)
      }
      guard let underlying = psql.underlying else { return nil }
      if let extra = underlying as? NIOSSLExtraError, extra == .failedToValidateHostname {
        return LiaisonError(
          .unavailable,
          "Could not connect: the certificate of \(server) does not name the host \(host.map { "'\($0)' " } ?? "")"
            + "(sslmode=verify-full checks that it does). Connect with a host name the certificate names, have the "
            + "certificate name this host, or use sslmode=verify-ca, which checks who signed it but not the name.",
          cause: error)
      }
      // A failed handshake is a NIOSSLError; an alert the server sends after it (TLS 1.3 checks
      // the client's certificate last) a BoringSSLError. Their text is BoringSSL's error stack:
      // the reasons are read from it, and it stays in the cause.
      guard underlying is NIOSSLError || underlying is BoringSSLError else { return nil }
      let detail = "\(underlying)"
      if detail.contains("CERTIFICATE_VERIFY_FAILED") {
        return LiaisonError(
          .unavailable,
          "Could not connect: the certificate of \(server) is not signed by a root this connection trusts, or "
            + "is not valid (expired, not yet valid). Give sslrootcert=/path/to/ca.pem, the CA that signed it (a "
            + "managed service publishes its CA bundle); or, to encrypt without checking, use sslmode=require "
            + "with no root certificate (no sslrootcert, no ~/.postgresql/root.crt).",
          cause: error)
      }
      if detail.contains("ALERT_UNKNOWN_CA") || detail.contains("CERTIFICATE_REQUIRED")
        || detail.contains("ALERT_BAD_CERTIFICATE")
      {
        return LiaisonError(
          .unavailable,
          "Could not connect: \(server) refused the client certificate (sslcert, or ~/.postgresql/postgresql.crt): "
            + "it is not signed by a CA the server trusts (its ssl_ca_file), or was expected and missing. Give "
            + "sslcert and sslkey, a certificate that CA signed.",
          cause: error)
      }
      if case .handshakeFailed = underlying as? NIOSSLError {
        return LiaisonError(
          .unavailable,
          "Could not connect: the TLS handshake with \(server) failed (\(detail)). Check the server's TLS setup "
            + "and the sslmode, sslrootcert, sslcert and sslkey parameters.",
          cause: error)
      }
      return nil
    }
  }
#endif
