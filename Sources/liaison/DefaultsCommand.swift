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

  struct Read: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Print a value, a domain, or every domain.",
      discussion: "With DOMAIN and KEY, exits 1 when the key has no value."
    )

    @OptionGroup var options: ContainerOptions
    @Argument(help: "The domain (default: every domain).") var domain: String?
    @Argument(help: "The key (default: every key of the domain).") var key: String?
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
      let output = try await Self.reporting { () throws -> (text: String, found: Bool) in
        let container = try options.open()
        if let domain, let key {
          guard let stored = try container.defaults(domain).rawValue(for: try LiaisonName(key)) else {
            return ("", false)
          }
          return (DefaultsCommand.show(stored), true)
        }
        let domains = try domain.map { [try LiaisonName($0)] } ?? container.defaultsDomains().map(\.domain)
        var all: [String: [String: String]] = [:]
        for name in domains {
          all[name.rawValue] = try container.defaults(name.rawValue).snapshot().mapValues(DefaultsCommand.show)
        }
        if json {
          let values = all.mapValues {
            $0.mapValues { text in
              (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
            }
          }
          let data = try JSONSerialization.data(withJSONObject: values, options: [.sortedKeys, .fragmentsAllowed])
          return (String(decoding: data, as: UTF8.self), true)
        }
        var lines: [String] = []
        for name in all.keys.sorted() {
          if domain == nil { lines.append("\(name):") }
          for (key, value) in all[name]!.sorted(by: { $0.key < $1.key }) {
            lines.append((domain == nil ? "  " : "") + "\(key) = \(value)")
          }
        }
        return (lines.joined(separator: "\n"), true)
      }
      if !output.text.isEmpty { print(output.text) }
      if !output.found { throw ExitCode(1) }
    }
  }

  struct Write: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Write a value: JSON, or else a plain string.",
      discussion:
        "`liaison defaults write app mode '\"dark\"'` and `liaison defaults write app mode dark` store the same string."
    )

    @OptionGroup var options: ContainerOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key.") var key: String
    @Argument(help: "The value: JSON, or else taken as a plain string.") var value: String

    func run() async throws {
      try await Self.reporting {
        try options.open().defaults(domain).setJSON(CommandLineValue.json(value), for: try LiaisonName(key))
      }
    }
  }

  struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a key, or every key of a domain.")

    @OptionGroup var options: ContainerOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key (default: every key of the domain).") var key: String?

    func run() async throws {
      try await Self.reporting {
        let defaults = try options.open().defaults(domain)
        if let key { try defaults.remove(named: try LiaisonName(key)) } else { try defaults.removeAll() }
      }
    }
  }

  struct Observe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Print each change of a domain, or of one key's value, until interrupted.",
      discussion: "With KEY, prints the value now and then each new value (`null` when deleted)."
    )

    @OptionGroup var options: ContainerOptions
    @Argument(help: "The domain.") var domain: String
    @Argument(help: "The key (default: the whole domain).") var key: String?

    func run() async throws {
      let (defaults, notifications) = try await Self.reporting {
        let defaults = try options.open().defaults(domain)
        return (defaults, try defaults.changes())
      }
      func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
      guard let key else {
        for await _ in notifications { emit("\(domain) changed") }
        return
      }
      let name = try await Self.reporting { try LiaisonName(key) }
      var last: DefaultsRawValue?? = nil
      var iterator = notifications.makeAsyncIterator()
      repeat {
        let current = try await Self.reporting { try defaults.rawValue(for: name) }
        if last == nil || last! != current {
          emit(current.map(DefaultsCommand.show) ?? "null")
          last = .some(current)
        }
      } while await iterator.next() != nil
    }
  }
}
