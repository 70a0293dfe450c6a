// The peer's commands on shared defaults on any backend, through `CoordinationDefaults` alone:
// `SharedDefaults` on a folder, or `PostgresDefaults` on PostgreSQL (see PlaceCommands.swift for
// how the place is chosen), so that a conformance test drives both backends the same way.

import Foundation
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The generations of `defaults`' change notifications, as they arrive.
private func changeStates(of defaults: some CoordinationDefaults) async throws -> AsyncThrowingStream<UInt64, any Error>
{
  stream(try await defaults.changes()) { $0.state }
}

/// The values of an `Int` key of `defaults` over time.
private func valueStream(of key: DefaultsKey<Int>, in defaults: some CoordinationDefaults) async throws
  -> AsyncThrowingStream<Int?, any Error>
{
  stream(try await defaults.changes(of: key)) { $0 }
}

/// The elements of `sequence`, transformed, on a task of their own that ends with the stream.
private func stream<S: AsyncSequence & Sendable, T: Sendable>(
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

/// One domain object per domain for the peer's life, so that its cache stays warm between
/// commands.
@MainActor private var placeDefaultsByDomain: [String: any CoordinationDefaults] = [:]
private let placeDefaultsValues = Inbox<String>()
private let placeDefaultsNotifications = Inbox<UInt64>()

/// The domain `domain` of the peer's place, whichever backend, through the protocol alone.
@MainActor private func placeDefaults(_ domain: String) throws -> any CoordinationDefaults {
  if let open = placeDefaultsByDomain[domain] { return open }
  let opened = try awaiting { try await place.defaults(domain) as any CoordinationDefaults }
  placeDefaultsByDomain[domain] = opened
  return opened
}

let placeDefaultsCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.placeDset, "DOMAIN KEY INT  → ok set") { words in
    let (defaults, key, value) = (
      try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]), Int(words[3])!
    )
    try awaiting { try await defaults.set(value, for: key, timeout: nil) }
    return "set"
  },
  PeerCommandHandler(.placeDsetstring, "DOMAIN KEY TEXT  → ok set") { words in
    let (defaults, key, value) = (try placeDefaults(words[1]), try DefaultsKey<String>(validating: words[2]), words[3])
    try awaiting { try await defaults.set(value, for: key, timeout: nil) }
    return "set"
  },
  PeerCommandHandler(.placeDsetbytes, "DOMAIN KEY COUNT   stores COUNT bytes as Data → ok set") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<Data>(validating: words[2]))
    let value = Data(repeating: 7, count: Int(words[3])!)
    try awaiting { try await defaults.set(value, for: key, timeout: nil) }
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
    try awaiting { for _ in 0..<count { try await defaults.update(key) { ($0 ?? 0) + 1 } } }
    return "done"
  },
  PeerCommandHandler(.placeDwatch, "DOMAIN KEY   collects the Int key's values (changes(of:)) → ok watching") { words in
    let (defaults, key) = (try placeDefaults(words[1]), try DefaultsKey<Int>(validating: words[2]))
    let values = try awaiting { try await valueStream(of: key, in: defaults) }
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
    let notifications = try awaiting { try await changeStates(of: defaults) }
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
