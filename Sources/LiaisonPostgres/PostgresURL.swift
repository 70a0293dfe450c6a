#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// A `postgres://` (or `postgresql://`) URL, read part by part:
  ///
  ///     postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE&sslrootcert=PATH]
  ///     postgres://USER[:PASSWORD]@/DATABASE?host=/path/to/socket-folder
  ///
  /// HOST is a host name, an IPv4 address, or an IPv6 address in brackets (`[::1]`); PORT is a
  /// number from 1 to 65535 (5432 when left out); the user, password, host, database and
  /// parameters may be percent-encoded (`%40` for `@`). The parameters are `host` (a Unix socket's
  /// folder, which then takes the place of HOST), and libpq's `sslmode`, `sslrootcert`, `sslcert`
  /// and `sslkey` (see ``PostgresTLS``).
  /// A part that breaks these rules is refused with a message that names the part (never the
  /// password itself), rather than read as something else: a port is never truncated, an IPv6
  /// address never looked up as a name.
  struct PostgresURL: Equatable {
    /// Where the server listens.
    enum Server: Equatable {
      /// A host name or IP address (an IPv6 address without its brackets).
      case host(String)
      /// The folder of a Unix socket.
      case socketFolder(String)
    }

    /// The user name, percent-decoded; never empty.
    var user: String
    /// The password, percent-decoded, when the URL has one.
    var password: String?
    /// The host, or the `host` parameter's socket folder.
    var server: Server
    /// 1 to 65535; 5432 when the URL gives none.
    var port: Int
    /// The database's name, percent-decoded; `nil` for the server's default (the user's name).
    var database: String?
    /// One of ``PostgresTLS/modes``: `prefer` when the URL gives none (`verify-full` with
    /// `sslrootcert=system`).
    var sslMode: String { tls.mode }
    /// The TLS parameters.
    var tls: PostgresTLS.Settings

    /// The parameters a URL may carry.
    static let parameters = ["host", "sslmode", "sslrootcert", "sslcert", "sslkey"]

    /// Reads `text`, checking every part.
    ///
    /// - Throws: ``LiaisonError/Code/invalidArgument``, with a message that names the part that
    ///   is wrong and shows how a URL is written.
    init(_ text: String) throws(LiaisonError) {
      guard let separator = text.range(of: "://"), ["postgres", "postgresql"].contains(text[..<separator.lowerBound])
      else { throw Self.invalid("it does not start with postgres:// or postgresql://") }
      var rest = text[separator.upperBound...]
      if rest.contains("#") {
        throw Self.invalid("it has a fragment ('#...'), which a PostgreSQL URL does not take (write a '#' as %23)")
      }
      var query: Substring = ""
      if let questionMark = rest.firstIndex(of: "?") {
        query = rest[rest.index(after: questionMark)...]
        rest = rest[..<questionMark]
      }
      let slash = rest.firstIndex(of: "/") ?? rest.endIndex
      let authority = rest[..<slash]
      let path = slash == rest.endIndex ? "" : rest[rest.index(after: slash)...]

      guard let at = authority.lastIndex(of: "@") else {
        throw Self.invalid("it names no user (USER@ before the host)")
      }
      let userInfo = authority[..<at]
      if let colon = userInfo.firstIndex(of: ":") {
        user = try Self.decode(userInfo[..<colon], "the user name")
        password = try Self.decode(userInfo[userInfo.index(after: colon)...], "the password")
      } else {
        user = try Self.decode(userInfo, "the user name")
        password = nil
      }
      guard !user.isEmpty else { throw Self.invalid("it names no user (USER@ before the host)") }

      let (host, portText) = try Self.hostAndPort(authority[authority.index(after: at)...])
      port = try portText.map(Self.port) ?? 5432
      let name = try Self.decode(path, "the database name")
      database = name.isEmpty ? nil : name

      var values: [String: String] = [:]
      for item in query.split(separator: "&", omittingEmptySubsequences: true) {
        guard let equals = item.firstIndex(of: "=") else {
          throw Self.invalid("the parameter '\(item)' has no value (write NAME=VALUE)")
        }
        let parameter = try Self.decode(item[..<equals], "a parameter's name")
        guard Self.parameters.contains(parameter) else {
          throw Self.invalid(
            "the parameter '\(parameter)' is not one Liaison reads (\(Self.parameters.joined(separator: ", ")))")
        }
        values[parameter] = try Self.decode(item[item.index(after: equals)...], "the parameter '\(parameter)'")
      }
      do {
        tls = try PostgresTLS.Settings(
          mode: values["sslmode"], rootCertificate: values["sslrootcert"], certificate: values["sslcert"],
          key: values["sslkey"])
      } catch {
        throw Self.invalid(error.message)
      }
      if let folder = values["host"], !folder.isEmpty {
        guard folder.hasPrefix("/") else {
          throw Self.invalid(
            "the host parameter '\(folder)' is not a Unix socket's folder (a path from /); write a host name "
              + "after the '@' instead")
        }
        server = .socketFolder(folder)
      } else {
        guard let host else { throw Self.invalid("it names no host (HOST after the '@')") }
        server = .host(host)
      }
    }

    /// Reads `text` into a postgres-nio configuration.
    static func configuration(_ text: String) throws(LiaisonError) -> PostgresConnection.Configuration {
      try PostgresURL(text).configuration()
    }

    /// The postgres-nio configuration that connects as this URL says.
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
    private static func hostAndPort(_ text: Substring) throws(LiaisonError) -> (host: String?, port: Substring?) {
      if text.hasPrefix("[") {
        guard let close = text.firstIndex(of: "]") else {
          throw invalid("the host '\(text)' opens a '[' it does not close (write an IPv6 address as [::1])")
        }
        let address = try decode(text[text.index(after: text.startIndex)..<close], "the host")
        // An IPv6 address may carry a zone after '%' (written %25 in a URL): fe80::1%25eth0.
        let withoutZone = address.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, String(withoutZone), &bytes) == 1 else {
          throw invalid("the host '[\(address)]' is not an IPv6 address (brackets hold only an IPv6 address)")
        }
        let after = text[text.index(after: close)...]
        guard after.isEmpty || after.hasPrefix(":") else {
          throw invalid("after the host '[\(address)]' comes '\(after)', where only :PORT may")
        }
        return (address, after.isEmpty ? nil : after.dropFirst())
      }
      let parts = text.split(separator: ":", omittingEmptySubsequences: false)
      guard parts.count <= 2 else {
        throw invalid("the host '\(text)' has more than one ':' (write an IPv6 address in brackets: [::1]:5432)")
      }
      let host = try decode(parts[0], "the host")
      guard host.unicodeScalars.allSatisfy(isHostNameCharacter) else {
        throw invalid(
          "the host '\(host)' is not a host name or IP address (letters, digits, '.', '-' and '_'; an IPv6 "
            + "address in brackets)")
      }
      return (host.isEmpty ? nil : host, parts.count == 2 ? parts[1] : nil)
    }

    /// The port in `text`: a number from 1 to 65535.
    private static func port(_ text: Substring) throws(LiaisonError) -> Int {
      guard !text.isEmpty else {
        throw invalid("the port after ':' is empty (give one, or leave out the ':' for 5432)")
      }
      guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let port = Int(text),
        (1...65535).contains(port)
      else { throw invalid("the port '\(text)' is not a number from 1 to 65535") }
      return port
    }

    /// `text` percent-decoded (`%40` is `@`).
    ///
    /// - Throws: when a `%` is not followed by two hexadecimal digits, when it encodes a NUL
    ///   byte, or when the bytes are not UTF-8; the message names the part (`what`) and never
    ///   shows its text, which may be a password.
    private static func decode(_ text: Substring, _ what: String) throws(LiaisonError) -> String {
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
          throw invalid(
            "\(what) has a '%' that two hexadecimal digits do not follow (percent-encoding: write a '%' itself as %25)")
        }
        guard high != 0 || low != 0 else { throw invalid("\(what) holds %00, a NUL byte, which PostgreSQL refuses") }
        bytes.append(high << 4 | low)
        index += 3
      }
      let decoded = String(decoding: bytes, as: UTF8.self)
      guard decoded.utf8.elementsEqual(bytes) else { throw invalid("\(what) is not UTF-8 once percent-decoded") }
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
        "The PostgreSQL URL is not usable: \(problem). Write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, or "
          + "postgres://USER@/DATABASE?host=/path/to/socket-folder for a Unix socket.")
    }
  }
#endif
