// The peer's commands on shared defaults.

import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One `SharedDefaults` per domain for the peer's life, so that its cache stays warm between
/// commands (a new one per command would never read from a cache).
@MainActor private var defaultsByDomain: [String: SharedDefaults] = [:]
/// Values a `dwatch` received, for `dnext`.
private let defaultsValues = Inbox<String>()

@MainActor private func defaults(_ domain: String) throws -> SharedDefaults {
  if let open = defaultsByDomain[domain] { return open }
  let opened = try container.defaults(domain)
  defaultsByDomain[domain] = opened
  return opened
}

let defaultsCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.dset, "DOMAIN KEY INT  → ok set") { words in
    try defaults(words[1]).set(Int(words[3])!, for: DefaultsKey<Int>(validating: words[2]))
    return "set"
  },
  PeerCommandHandler(.dget, "DOMAIN KEY  → ok INT | ok nil") { words in
    try defaults(words[1]).get(DefaultsKey<Int>(validating: words[2])).map(String.init) ?? "nil"
  },
  PeerCommandHandler(.dincrement, "DOMAIN KEY COUNT   COUNT atomic updates +1 → ok done") { words in
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<Int>(validating: words[2])
    for _ in 0..<Int(words[3])! { try defaults.update(key) { ($0 ?? 0) + 1 } }
    return "done"
  },
  PeerCommandHandler(.dread, "DOMAIN KEY COUNT   COUNT reads → ok done") { words in
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<Int>(validating: words[2])
    for _ in 0..<Int(words[3])! { _ = try defaults.get(key) }
    return "done"
  },
  PeerCommandHandler(
    .drefresh,
    """
    DOMAIN KEY COUNTFILE [hang|timeout=MS]   refresh a String key whose stale value is "stale"; the \
    refresh appends a line to COUNTFILE (with `hang`, it then writes COUNTFILE.started and never \
    finishes; with `timeout=MS`, waits for another refresh at most MS) → ok VALUE
    """
  ) { words in
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<String>(validating: words[2])
    let countFile = words[3]
    let hang = words.count > 4 && words[4] == "hang"
    let timeout: Duration =
      words.count > 4 && words[4].hasPrefix("timeout=") ? .milliseconds(Int(words[4].dropFirst(8))!) : .seconds(60)
    let result = blocking { () -> Result<String, any Error> in
      do {
        return .success(
          try await defaults.refresh(
            key, timeout: timeout, isFresh: { $0 != "stale" },
            using: {
              let line = Array("\(getpid())\n".utf8)
              let fd = open(countFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
              _ = write(fd, line, line.count)
              close(fd)
              if hang {
                close(open(countFile + ".started", O_WRONLY | O_CREAT, 0o600))
                while true { sleep(1000) }
              }
              return "fresh-from-\(getpid())"
            }))
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  },
  PeerCommandHandler(.dwatch, "DOMAIN KEY   starts watching a key's changes → ok watching") { words in
    let (domain, key) = (try defaults(words[1]), try DefaultsKey<Int>(validating: words[2]))
    // Subscribed before the answer, so that a write the test makes after it is seen.
    let changes = try blocking { () async -> Result<DefaultsValueChanges<SharedDefaults, Int>, LiaisonError> in
      do throws(LiaisonError) { return .success(try await domain.changes(of: key)) } catch { return .failure(error) }
    }.get()
    watches["defaults." + words[1]] = Task.detached {
      do {
        for try await value in changes { defaultsValues.put(value.map(String.init) ?? "nil") }
      } catch {
        defaultsValues.put("error \(error)")
      }
    }
    return "watching"
  },
  PeerCommandHandler(.dnext, "[MILLISECONDS]   the next value a dwatch saw → ok INT | ok nil | ok none") { words in
    defaultsValues.take(milliseconds: waitMilliseconds(words)) ?? "none"
  },
  PeerCommandHandler(.dbusy, "→ ok N (times SQLite's busy handler ran in this process)") { _ in
    String(SharedDefaults.sqliteBusyWaits)
  },
]
