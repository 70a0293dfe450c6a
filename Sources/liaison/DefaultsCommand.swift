import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine
import LiaisonStore

struct DefaultsCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "defaults",
    abstract: "Read, write, delete and observe shared defaults.",
    discussion: """
      Values are shown as their JSON; a raw `Data` value as `data:` and its base64.

        liaison defaults write settings theme dark          # a plain string
        liaison defaults write settings volume 0.8          # JSON
        liaison defaults read settings

      \(DocsPage.defaults)
      """,
    subcommands: [Read.self, Write.self, Delete.self, Observe.self]
  )

  /// A stored value as text: its JSON, or `data:BASE64` for raw bytes.
  static func show(_ value: DefaultsRawValue) -> String {
    switch value {
    case .json(let json): String(decoding: json, as: UTF8.self)
    case .data(let data): "data:" + data.base64EncodedString()
    }
  }

  /// A stored value's text (``show(_:)``) as the text output shows it, on one line: JSON's layout
  /// (a line break, tab or carriage return, which valid JSON has only between its tokens) as
  /// spaces, and every other control character escaped (``CommandLineText/visible(_:)``).
  static func oneLine(_ shown: String) -> String {
    // Most text has no layout to change: then only the escaping pass, which returns it as it is.
    guard shown.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else {
      return CommandLineText.visible(shown)
    }
    var layout = ""
    layout.unicodeScalars.append(
      contentsOf: shown.unicodeScalars.map { $0 == "\n" || $0 == "\r" || $0 == "\t" ? " " : $0 })
    return CommandLineText.visible(layout)
  }

  /// A stored value as `defaults read` shows it: its text and its JSON value (raw bytes as the
  /// string `data:BASE64`), or `nil` when the stored JSON is not JSON (another program wrote it).
  static func readable(_ value: DefaultsRawValue) -> (text: String, json: Any)? {
    switch value {
    case .json(let json):
      // JSON that `JSONSerialization` cannot hold (beyond ±1.8e308, nested past 512 levels; only
      // a program may store it, `liaison` refuses to) is shown as its text.
      guard JSONText.isValid(json) else { return nil }
      let text = String(decoding: json, as: UTF8.self)
      return (text, (try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])) ?? text)
    case .data:
      return (show(value), show(value))
    }
  }

  /// Whether `stored` is the value that `old` names: as `defaults read` prints it (one line,
  /// its layout as spaces), or as the JSON that `defaults write` would store for `old`. So the
  /// read-modify-write loop of `--if-value` ends for every value `read` prints, a pretty-printed
  /// object or one with tabs included.
  static func matches(_ stored: DefaultsRawValue, printedAs old: String) -> Bool {
    if oneLine(show(stored)) == oneLine(old) { return true }
    guard case .json(let json) = stored, let given = try? CommandLineValue.json(old) else { return false }
    return json == given
  }

  /// The message for a value that cannot be read, naming its domain and key and the way out.
  static func unreadable(domain: String, key: String, _ reason: String) -> String {
    "The value of '\(key)' in the defaults domain '\(domain)' cannot be read: \(reason) Write it again "
      + "(liaison defaults write \(domain) \(key) VALUE) or delete it (liaison defaults delete \(domain) \(key))."
  }

  struct Read: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Print a value, a domain, or every domain.",
      discussion: "With DOMAIN and KEY, exits 1 when the key has no value." + "\n\n" + DocsPage.defaults
    )

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The domain (default: every domain).") var domain: String?
    @Argument(help: "The key (default: every key of the domain).") var key: String?
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
      try await Self.reporting {
        try await options.withPlace(creating: false) { place in try await read(place) }
      }
    }

    /// Prints the value, the domain or every domain of `place`.
    private func read(_ place: some CommandPlace) async throws {
      var domains = try await place.defaultsDomains().map(\.domain)
      if let domain {
        let name = try LiaisonName(domain)
        domains = domains.filter { $0 == name }
      }
      if let domain, let key {
        let name = try LiaisonName(key)
        guard !domains.isEmpty else { throw ExitCode(1) }
        let stored: DefaultsRawValue?
        do {
          stored = try await place.defaults(domain, timeout: nil).rawValue(for: name)
        } catch {
          // A guard, not `catch … where`: after a typed throw, that crashes Swift 6.3.1's SIL passes.
          guard error.code == .corruptFile else { throw error }
          throw CLIError(
            DefaultsCommand.unreadable(domain: domain, key: key, "its kind or bytes are not what Liaison stores."),
            status: ExitStatus.failure)
        }
        guard let stored else { throw ExitCode(1) }
        guard let shown = DefaultsCommand.readable(stored) else {
          throw CLIError(
            DefaultsCommand.unreadable(domain: domain, key: key, "it is not JSON."), status: ExitStatus.failure)
        }
        try printLine(json ? try Self.jsonText(shown.json) : DefaultsCommand.oneLine(shown.text))
        return
      }
      var all: [String: [String: (text: String, json: Any)]] = [:]
      var problems: [String] = []
      for name in domains {
        let rows = try await place.defaults(name.rawValue, timeout: nil).rowsReadOneByOne()
        all[name.rawValue] = [:]
        for (key, value) in rows {
          switch value.map(DefaultsCommand.readable) {
          case .success(let shown?): all[name.rawValue]![key] = shown
          case .success(nil):
            problems.append(DefaultsCommand.unreadable(domain: name.rawValue, key: key, "it is not JSON."))
          case .failure:
            problems.append(
              DefaultsCommand.unreadable(
                domain: name.rawValue, key: key, "its kind or bytes are not what Liaison stores."))
          }
        }
      }
      if json {
        try printLine(try Self.jsonText(all.mapValues { $0.mapValues(\.json) }))
      } else {
        for name in all.keys.sorted() {
          if domain == nil { try printLine("\(CommandLineText.visible(name)):") }
          for (key, value) in all[name]!.sorted(by: { $0.key < $1.key }) {
            try printLine(
              (domain == nil ? "  " : "") + "\(CommandLineText.visible(key)) = \(DefaultsCommand.oneLine(value.text))")
          }
        }
      }
      for problem in problems { printError("liaison: " + problem) }
      if !problems.isEmpty { throw ExitCode(ExitStatus.failure) }
    }

    /// `value` as one line of JSON with sorted keys.
    static func jsonText(_ value: Any) throws -> String {
      let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
      return String(decoding: data, as: UTF8.self)
    }
  }

  struct Write: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Write a value: JSON, or else a plain string.",
      discussion: """
        `liaison defaults write app mode '"dark"'` and `liaison defaults write app mode dark` store the same string.         JSON is stored as given; JSON that liaison could not print back (a number beyond ±1.8e308, nesting past         512 levels) is refused.

        With --if-value OLD (or --if-absent), writes only if the key's value is OLD now (or it has none), in one \
        step no other write comes between; else exits 1, having written nothing. OLD is compared with the \
        stored value as `liaison defaults read DOMAIN KEY` prints it, so a script updates a value atomically \
        by reading it, computing the new one, and writing it on that condition until the write is made:

          until old=$(liaison defaults read stats runs)
                if [ -n "$old" ]; then liaison defaults write stats runs $((old + 1)) --if-value "$old"
                else liaison defaults write stats runs 1 --if-absent; fi
          do :; done

        \(DocsPage.defaults)
        """
    )

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key.") var key: String
    @Argument(help: "The value: JSON, or else taken as a plain string; - reads it from standard input.")
    var value: String
    @Option(
      help: ArgumentHelp(
        "Write only if the key's value is this one now, as `defaults read` prints it (JSON, or else a plain "
          + "string); else exit 1, writing nothing.",
        valueName: "old"))
    var ifValue: String?
    @Flag(help: "Write only if the key has no value now; else exit 1, writing nothing.") var ifAbsent = false
    @OptionGroup var wait: StoreTimeoutOption

    func validate() throws {
      if ifValue != nil && ifAbsent { throw ValidationError("Give --if-value or --if-absent, not both.") }
    }

    func run() async throws {
      try await Self.reporting {
        try await options.withPlace(creating: true) { place in
          let text = try TextInput.valueOrStandardInput(value, limit: SharedDefaults.maximumValueSize)
          let (json, name) = (try CommandLineValue.json(text), try LiaisonName(key))
          let written = try await wait.waiting(forThe: "defaults") { timeLeft in
            let defaults = try await place.defaults(domain, timeout: timeLeft())
            guard ifAbsent || ifValue != nil else {
              try await defaults.setJSON(json, for: name, timeout: timeLeft())
              return true
            }
            var expected: DefaultsRawValue?
            if let ifValue {
              // Compared with the value as `defaults read` prints it, then written on the condition
              // that the stored bytes are still the ones compared: one step no write comes between.
              guard let current = try await defaults.rawValue(for: name),
                DefaultsCommand.matches(current, printedAs: ifValue)
              else { return false }
              expected = current
            }
            return try await defaults.setJSON(json, for: name, replacing: expected, timeout: timeLeft())
          }
          // The condition did not hold: the documented answer, not an error (as `test` exits 1).
          if !written { throw ExitCode(1) }
        }
      }
    }
  }

  struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Delete a key, or every key of a domain.", discussion: DocsPage.defaults)

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key (default: every key of the domain).") var key: String?
    @OptionGroup var wait: StoreTimeoutOption

    func run() async throws {
      try await Self.reporting {
        try await options.withPlace(creating: true) { place in
          let name = try key.map { try LiaisonName($0) }
          try await wait.waiting(forThe: "defaults") { timeLeft in
            let defaults = try await place.defaults(domain, timeout: timeLeft())
            if let name {
              try await defaults.remove(named: name, timeout: timeLeft())
            } else {
              try await defaults.removeAll(timeout: timeLeft())
            }
          }
        }
      }
    }
  }

  struct Observe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Print each change of a domain, or of one key's value, until interrupted.",
      discussion: "With KEY, prints the value now and then each new value (`null` when deleted)." + "\n\n"
        + DocsPage.defaults
    )

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key (default: the whole domain).") var key: String?

    func run() async throws {
      try await Self.reporting {
        try await options.withPlace(creating: true) { place in
          try await observe(in: place)
        }
      }
    }

    /// Prints the changes of the domain in `place` until interrupted.
    private func observe(in place: some CommandPlace) async throws {
      let defaults = try await place.defaults(domain, timeout: nil)
      let notifications = try await defaults.changes()
      guard let key else {
        for try await _ in notifications { try printLine("\(domain) changed") }
        return
      }
      let name = try LiaisonName(key)
      var last: DefaultsRawValue?? = nil
      var iterator = notifications.makeAsyncIterator()
      repeat {
        let current = try await defaults.rawValue(for: name)
        if last == nil || last! != current {
          try printLine(current.map { DefaultsCommand.oneLine(DefaultsCommand.show($0)) } ?? "null")
          last = .some(current)
        }
      } while try await iterator.next() != nil
    }
  }
}
