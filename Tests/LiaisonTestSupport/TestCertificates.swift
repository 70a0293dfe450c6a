// Throwaway certificates for the TLS tests: a certificate authority made with `openssl` in a
// temporary folder, the certificates it signs, and how a PostgreSQL test server uses them.

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A throwaway certificate authority: a self-signed root made with `openssl` (P-256 keys, valid
/// two days) in a temporary folder of its own, deleted when the authority is released or this
/// process exits.
///
/// ```swift
/// let authority = try TestCertificateAuthority()
/// let server = try authority.issue("server", commonName: "localhost", dnsNames: ["localhost"])
/// // server.certificateFile, server.keyFile; authority.certificateFile is the root to trust
/// ```
public final class TestCertificateAuthority: Sendable {
  /// The folder that holds the authority's files and those of the certificates it issues.
  public let folder: String
  /// The root certificate (PEM): what a client that trusts this authority is given.
  public let certificateFile: String
  private let keyFile: String

  /// Makes a new authority whose root's common name is `name`.
  ///
  /// - Throws: ``TestInfrastructureError`` when `openssl` is missing or fails, with its output.
  public init(name: String = "Liaison Test CA") throws {
    folder = try makeTemporaryFolder("liaison-ca")
    certificateFile = folder + "/ca.crt"
    keyFile = folder + "/ca.key"
    do {
      try openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", keyFile,
        "-out", certificateFile, "-days", "2", "-subj", "/CN=\(name)", "-addext",
        "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    } catch {
      try? FileManager.default.removeItem(atPath: folder)
      throw error
    }
    // An authority kept in a `static let` is never released: its folder goes at exit.
    ExitCleanup.register(self) { [folder] in try? FileManager.default.removeItem(atPath: folder) }
  }

  deinit {
    ExitCleanup.unregister(self)
    try? FileManager.default.removeItem(atPath: folder)
  }

  /// A certificate signed by this authority, for a server or a client, and its key (mode 0600).
  ///
  /// - Parameters:
  ///   - name: the files' name in ``folder``: `NAME.crt` and `NAME.key`.
  ///   - commonName: the subject's common name (a client certificate's user name).
  ///   - dnsNames: the host names in its subject alternative names.
  ///   - ipAddresses: the IP addresses in its subject alternative names.
  public func issue(_ name: String, commonName: String, dnsNames: [String] = [], ipAddresses: [String] = [])
    throws -> TestCertificate
  {
    let certificate = TestCertificate(certificateFile: "\(folder)/\(name).crt", keyFile: "\(folder)/\(name).key")
    let request = "\(folder)/\(name).csr"
    let extensions = "\(folder)/\(name).ext"
    let alternativeNames = dnsNames.map { "DNS:\($0)" } + ipAddresses.map { "IP:\($0)" }
    var lines = ["basicConstraints=critical,CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
    if !alternativeNames.isEmpty { lines.append("subjectAltName=" + alternativeNames.joined(separator: ",")) }
    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: extensions))
    try openssl(
      "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
      certificate.keyFile, "-out", request, "-subj", "/CN=\(commonName)")
    try openssl(
      "x509", "-req", "-in", request, "-CA", certificateFile, "-CAkey", keyFile, "-CAcreateserial", "-out",
      certificate.certificateFile, "-days", "2", "-extfile", extensions)
    guard chmod(certificate.keyFile, 0o600) == 0 else {
      throw TestInfrastructureError("cannot chmod \(certificate.keyFile): \(String(cString: strerror(errno)))")
    }
    return certificate
  }

  private func openssl(_ arguments: String...) throws {
    let program = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
      .first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let program else {
      throw TestInfrastructureError("the TLS tests make certificates with openssl, which is not installed")
    }
    try runCommand([program] + arguments)
  }
}

/// A certificate and its private key, PEM files made by ``TestCertificateAuthority/issue(_:commonName:dnsNames:ipAddresses:)``.
public struct TestCertificate: Sendable {
  /// The certificate (PEM).
  public let certificateFile: String
  /// Its private key (PEM, not encrypted, mode 0600).
  public let keyFile: String
}

/// How a ``PostgresTestServer`` offers TLS: its certificate, and what it asks of the clients that
/// connect over TCP. Its Unix socket stays open to all (for ``PostgresTestServer/psql(_:)``).
public struct PostgresTestTLS: Sendable {
  /// What the server asks of a client over TCP.
  public enum Clients: Sendable {
    /// TLS or not, as the client chooses.
    case tlsOptional
    /// TLS only (`hostssl … trust`): a client without TLS is refused.
    case tlsRequired
    /// TLS with a client certificate signed by the authority whose root is this file, and whose
    /// common name is the user's name (`hostssl … cert`, `ssl_ca_file`).
    case certificateSignedBy(String)
  }

  /// The server's certificate and key.
  public let certificate: TestCertificate
  /// What the server asks of clients over TCP.
  public let clients: Clients

  /// The TLS of a server with `certificate`, asking `clients` what it asks.
  ///
  /// - Parameters:
  ///   - certificate: the server's certificate and key.
  ///   - clients: what the server asks of clients over TCP.
  public init(certificate: TestCertificate, clients: Clients) {
    self.certificate = certificate
    self.clients = clients
  }

  /// Copies the files into the server's `folder` (the server's user's, mode 0600: PostgreSQL
  /// refuses a key that others may read), turns TLS on in its configuration, and writes its
  /// `pg_hba.conf`.
  func install(folder: String, dataDirectory: String) throws {
    var settings = [
      "ssl = on",
      "ssl_cert_file = '\(try copy(certificate.certificateFile, to: folder + "/server.crt"))'",
      "ssl_key_file = '\(try copy(certificate.keyFile, to: folder + "/server.key"))'",
    ]
    let method: String
    switch clients {
    case .tlsOptional:
      method = "host all all {} trust"
    case .tlsRequired:
      method = "hostssl all all {} trust"
    case .certificateSignedBy(let root):
      settings.append("ssl_ca_file = '\(try copy(root, to: folder + "/client-ca.crt"))'")
      method = "hostssl all all {} cert"
    }
    let configuration = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory + "/postgresql.conf"))
    defer { try? configuration.close() }
    try configuration.seekToEnd()
    try configuration.write(contentsOf: Data(("\n" + settings.joined(separator: "\n") + "\n").utf8))
    let hba = ["local all all trust"] + ["0.0.0.0/0", "::/0"].map { method.replacingOccurrences(of: "{}", with: $0) }
    try Data((hba.joined(separator: "\n") + "\n").utf8).write(
      to: URL(fileURLWithPath: dataDirectory + "/pg_hba.conf"))
  }

  /// Copies `source` to `destination`, owned by the server's user, mode 0600; returns `destination`.
  private func copy(_ source: String, to destination: String) throws -> String {
    try FileManager.default.copyItem(atPath: source, toPath: destination)
    guard chmod(destination, 0o600) == 0 else {
      throw TestInfrastructureError("cannot chmod \(destination): \(String(cString: strerror(errno)))")
    }
    if isRoot, let user = getpwnam(serverUser), chown(destination, user.pointee.pw_uid, user.pointee.pw_gid) != 0 {
      throw TestInfrastructureError("cannot give \(destination) to \(serverUser): \(String(cString: strerror(errno)))")
    }
    return destination
  }
}

/// A new folder (mode 0700) in the temporary folder, its name starting with `prefix`.
func makeTemporaryFolder(_ prefix: String) throws -> String {
  var template = Array(
    URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("\(prefix)-XXXXXX").path.utf8CString)
  guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
    throw TestInfrastructureError(
      "cannot create a folder in \(NSTemporaryDirectory()): \(String(cString: strerror(errno)))")
  }
  return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
