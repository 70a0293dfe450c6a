// The peer's commands on shared defaults on any backend: `SharedDefaults` on a folder, or
// `PostgresDefaults` on PostgreSQL (see PlaceCommands.swift for how the place is chosen), each
// command one body for both, so that a conformance test drives both backends the same way.

import Foundation
import Liaison
import LiaisonStore

#if Postgres
  import LiaisonPostgres
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A defaults domain on the peer's place: the operations the conformance tests use, each
/// through the backend's own `async` API.
enum PlaceDefaults: Sendable {
  case local(SharedDefaults)
  #if Postgres
    case postgres(PostgresDefaults)
  #endif

  func set<Value>(_ value: Value, for key: DefaultsKey<Value>) async throws {
    switch self {
    case .local(let defaults): try await defaults.set(value, for: key)
    #if Postgres
      case .postgres(let defaults): try await defaults.set(value, for: key)
    #endif
    }
  }

  func get<Value>(_ key: DefaultsKey<Value>) async throws -> Value? {
    switch self {
    case .local(let defaults): return try defaults.get(key)
    #if Postgres
      case .postgres(let defaults): return try await defaults.get(key)
    #endif
    }
  }

  func increment(_ key: DefaultsKey<Int>) async throws {
    switch self {
    case .local(let defaults): try await defaults.update(key) { ($0 ?? 0) + 1 }
    #if Postgres
      case .postgres(let defaults): try await defaults.update(key) { ($0 ?? 0) + 1 }
    #endif
    }
  }

  func refresh(
    _ key: DefaultsKey<String>, timeout: Duration, isFresh: (String) -> Bool, using fetch: () async throws -> String
  ) async throws -> String {
    switch self {
    case .local(let defaults): return try await defaults.refresh(key, timeout: timeout, isFresh: isFresh, using: fetch)
    #if Postgres
      case .postgres(let defaults):
        return try await defaults.refresh(key, timeout: timeout, isFresh: isFresh, using: fetch)
    #endif
    }
  }

  /// The generations of the domain's change notifications, as they arrive.
  func notifications() async throws -> AsyncThrowingStream<UInt64, any Error> {
    switch self {
    case .local(let defaults): return Self.states(of: try defaults.changes())
    #if Postgres
      case .postgres(let defaults): return Self.states(of: try await defaults.changes())
    #endif
    }
  }

  /// The values of an `Int` key over time.
  func values(of key: DefaultsKey<Int>) async throws -> AsyncThrowingStream<Int?, any Error> {
    switch self {
    case .local(let defaults): return Self.stream(try await defaults.changes(of: key))
    #if Postgres
      case .postgres(let defaults): return Self.stream(try await defaults.changes(of: key))
    #endif
    }
  }

  private static func states<S: AsyncSequence & Sendable>(of notifications: S) -> AsyncThrowingStream<UInt64, any Error>
  where S.Element == SignalNotification {
    stream(notifications) { $0.state }
  }

  private static func stream<S: AsyncSequence & Sendable>(_ sequence: S) -> AsyncThrowingStream<S.Element, any Error>
  where S.Element: Sendable {
    stream(sequence) { $0 }
  }

  /// The elements of `sequence`, transformed, on a task of their own that ends with the stream.
  private static func stream<S: AsyncSequence & Sendable, T: Sendable>(
    _ sequence: S, _ transform: @escaping @Sendable (S.Element) -> T
  ) -> AsyncThrowingStream<T, any Error> {
    AsyncThrowingStream { continuation in
      let task = Task {
        do {
          for try await element in sequence { continuation.yield(transform(element)) }
          continuation.finish()
        } catch {
          continuation.finish(throwing: error)
        }
      }
      continuation.onTermination = { _ in task.cancel() }
    }
  }
}

/// One domain object per domain for the peer's life, so that its cache stays warm between
/// commands.
@MainActor private var placeDefaultsByDomain: [String: PlaceDefaults] = [:]
private let placeDefaultsValues = Inbox<String>()
private let placeDefaultsNotifications = Inbox<UInt64>()

@MainActor private func placeDefaults(_ domain: String) throws -> PlaceDefaults {
  if let open = placeDefaultsByDomain[domain] { return open }
  let opened: PlaceDefaults
  #if Postgres
    if let postgres = place as? PostgresContainer {
      opened = .postgres(try awaiting { try await postgres.defaults(domain) })
    } else {
      opened = .local(try container.defaults(domain))
    }
  #else
    opened = .local(try container.defaults(domain))
  #endif
  placeDefaultsByDomain[domain] = opened
  return opened
}

let placeDefaultsCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.placeDset, "DOMAIN KEY INT  → ok set") { words in
    let (defaults, key, value) = (
      try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]), Int(words[3])!
    )
    try awaiting { try await defaults.set(value, for: key) }
    return "set"
  },
  PeerCommandHandler(.placeDsetstring, "DOMAIN KEY TEXT  → ok set") { words in
    let (defaults, key, value) = (try placeDefaults(words[1]), try DefaultsKey<String>(validating: words[2]), words[3])
    try awaiting { try await defaults.set(value, for: key) }
    return "set"
  },
  PeerCommandHandler(.placeDsetbytes, "DOMAIN KEY COUNT   stores COUNT bytes as Data → ok set") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<Data>(validating: words[2]))
    let value = Data(repeating: 7, count: Int(words[3])!)
    try awaiting { try await defaults.set(value, for: key) }
    return "set"
  },
  PeerCommandHandler(.placeDget, "DOMAIN KEY  → ok INT | ok nil") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]))
    return try awaiting { try await defaults.get(key) }.map(String.init) ?? "nil"
  },
  PeerCommandHandler(.placeDgetstring, "DOMAIN KEY  → ok TEXT | ok nil") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<String>(validating: words[2]))
    return try awaiting { try await defaults.get(key) } ?? "nil"
  },
  PeerCommandHandler(.placeDincrement, "DOMAIN KEY COUNT   COUNT atomic updates +1 → ok done") { words in
    let (defaults, key, count) = (
      try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]), Int(words[3])!
    )
    try awaiting { for _ in 0..<count { try await defaults.increment(key) } }
    return "done"
  },
  PeerCommandHandler(.placeDwatch, "DOMAIN KEY   collects the Int key's values (changes(of:)) → ok watching") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]))
    let values = try awaiting { try await defaults.values(of: key) }
    watches["place-defaults " + words[1] + " " + words[2]] = Task.detached {
      do {
        for try await value in values { placeDefaultsValues.put(value.map(String.init) ?? "nil") }
      } catch {
        placeDefaultsValues.put("error \(error)")
      }
    }
    return "watching"
  },
  PeerCommandHandler(.placeDnext, "[MS]   the next value a place-dwatch saw → ok INT | ok nil | ok none") { words in
    placeDefaultsValues.take(milliseconds: waitMilliseconds(words)) ?? "none"
  },
  PeerCommandHandler(.placeDobserve, "DOMAIN   collects the domain's change notifications (changes()) → ok observing") {
    words in
    let defaults = try placeDefaults(words[1])
    let notifications = try awaiting { try await defaults.notifications() }
    watches["place-defaults " + words[1]] = Task.detached {
      do {
        for try await state in notifications { placeDefaultsNotifications.put(state) }
      } catch {}
    }
    return "observing"
  },
  PeerCommandHandler(.placeDnextnotification, "[MS]  → ok STATE | ok none") { words in
    placeDefaultsNotifications.take(milliseconds: waitMilliseconds(words)).map(String.init) ?? "none"
  },
  PeerCommandHandler(
    .placeDrefresh,
    """
    DOMAIN KEY COUNTFILE [hang-first|pause-first]   refresh a String key whose stale value is "stale"; \
    each fetch appends "PID" to COUNTFILE; the first fetch (COUNTFILE had no line) then writes \
    COUNTFILE.started and, with `hang-first`, never finishes, with `pause-first`, waits for \
    COUNTFILE.go to exist before it returns → ok VALUE
    """
  ) { words in
    let (defaults, key, countFile) = (
      try placeDefaults(words[1]), try DefaultsKey<String>(validating: words[2]), words[3]
    )
    let mode = words.count > 4 ? words[4] : ""
    return try awaiting {
      try await defaults.refresh(key, timeout: .seconds(120), isFresh: { $0 != "stale" }) {
        append("\(getpid())\n", to: countFile)
        let lines = (try? String(contentsOfFile: countFile, encoding: .utf8))?.split(separator: "\n").count ?? 0
        if lines == 1 && (mode == "hang-first" || mode == "pause-first") {
          close(open(countFile + ".started", O_WRONLY | O_CREAT, 0o600))
          if mode == "hang-first" {
            while true { sleep(1000) }
          }
          while !FileManager.default.fileExists(atPath: countFile + ".go") { usleep(10_000) }
        }
        return "fresh-from-\(getpid())"
      }
    }
  },
]
