#if Postgres
  import Liaison

  /// A PostgreSQL password file (`~/.pgpass`, or the file `$PGPASSFILE` names), read as libpq
  /// reads it: one `hostname:port:database:username:password` line per entry, the first line
  /// that matches wins.
  ///
  /// A field of `*` matches anything; `\:` and `\\` stand for `:` and `\` in every field; a line
  /// that starts with `#` is a comment; a line with fewer than five fields is skipped. The host
  /// `localhost` matches the default Unix socket folder (and a connection that names no host);
  /// another socket folder is matched by its path.
  struct PasswordFile: Equatable {
    /// One line's five fields, unescaped; `nil` for `*`.
    struct Entry: Equatable {
      var host: String?
      var port: String?
      var database: String?
      var user: String?
      var password: String
    }

    var entries: [Entry]

    /// Reads the lines of `text`; skips comments and lines without five fields.
    init(_ text: String) {
      entries = []
      for line in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
        var line = Substring(line)
        if line.hasSuffix("\r") { line = line.dropLast() }
        if line.hasPrefix("#") { continue }
        if let entry = Self.entry(line) { entries.append(entry) }
      }
    }

    /// The password of the first entry that matches, if any. An empty password counts as none.
    func password(host: String, port: Int, database: String, user: String) -> String? {
      let port = String(port)
      for entry in entries
      where [(entry.host, host), (entry.port, port), (entry.database, database), (entry.user, user)].allSatisfy({
        $0.0 == nil || $0.0 == $0.1
      }) {
        return entry.password.isEmpty ? nil : entry.password
      }
      return nil
    }

    /// The fields of `line`: four separated by unescaped `:`, the password the rest up to an
    /// unescaped `:` (as libpq, which ends it there).
    private static func entry(_ line: Substring) -> Entry? {
      var fields: [(text: String, isWildcard: Bool)] = []
      var current = ""
      var escapedAny = false
      var iterator = line.makeIterator()
      while let character = iterator.next() {
        if character == "\\" {
          current.append(iterator.next() ?? "\\")
          escapedAny = true
        } else if character == ":" {
          fields.append((current, current == "*" && !escapedAny))
          if fields.count == 5 { break }
          current = ""
          escapedAny = false
        } else {
          current.append(character)
        }
      }
      if fields.count < 5 { fields.append((current, false)) }
      guard fields.count == 5 else { return nil }
      func field(_ index: Int) -> String? { fields[index].isWildcard ? nil : fields[index].text }
      return Entry(host: field(0), port: field(1), database: field(2), user: field(3), password: fields[4].text)
    }
  }
#endif
