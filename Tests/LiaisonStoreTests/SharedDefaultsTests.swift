import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

@Suite("SharedDefaults across processes")
struct SharedDefaultsTests {
  let directory = TemporaryDirectory()

  @Test func eightProcessesIncrementingOneKeyCountExactly() throws {
    let peers = try (0..<8).map { _ in try Peer(container: directory.path) }
    for peer in peers { peer.child.write("dincrement counters launches 500") }
    for peer in peers {
      #expect(try peer.child.readLine(timeout: 600) == "ok done")  // an error answer would be SQLITE_BUSY
    }
    let defaults = try SharedContainer(directory: directory.path).defaults("counters")
    #expect(try defaults.get(DefaultsKey<Int>("launches")) == 4000)
  }

  @Test func aSetInOneProcessIsSeenByTheNextGetInAnotherAndByItsChanges() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    #expect(try reader.send("dget settings volume") == "nil")  // fills the reader's cache
    try reader.send("dwatch settings volume")
    #expect(try reader.send("dnext") == "nil")
    for value in 1...20 {
      try writer.send("dset settings volume \(value)")  // returned: the reader must see it now
      #expect(try reader.send("dget settings volume") == "\(value)")
    }
    // Coalesced: at least one change, ending on the last value, in order, with no repeats.
    var seen: [String] = []
    repeat {
      seen.append(try reader.send("dnext"))
    } while seen.last != "20" && seen.last != "none"
    #expect(seen.last == "20")
    #expect(seen.compactMap { Int($0) } == seen.compactMap { Int($0) }.sorted())
    #expect(Set(seen).count == seen.count)
  }

  @Test func writersAndReadersInSixProcessesNeverSeeBusy() throws {
    let writers = try (0..<4).map { _ in try Peer(container: directory.path) }
    let readers = try (0..<2).map { _ in try Peer(container: directory.path) }
    for writer in writers { writer.child.write("dincrement busy count 300") }
    for reader in readers { reader.child.write("dread busy count 3000") }
    for peer in writers + readers {
      #expect(try peer.child.readLine(timeout: 600) == "ok done")
    }
    #expect(try SharedContainer(directory: directory.path).defaults("busy").get(DefaultsKey<Int>("count")) == 1200)
  }

  @Test func eightProcessesRefreshingAStaleTokenRefreshItOnce() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("auth")
    try defaults.set("stale", for: DefaultsKey<String>("token"))
    let countFile = directory.path + "/refreshes"
    let peers = try (0..<8).map { _ in try Peer(container: directory.path) }
    for peer in peers { peer.child.write("drefresh auth token \(countFile)") }
    var tokens: Set<String> = []
    for peer in peers {
      let answer = try peer.child.readLine(timeout: 120)
      #expect(answer.hasPrefix("ok fresh-from-"))
      tokens.insert(answer)
    }
    #expect(tokens.count == 1)
    let refreshes = try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n")
    #expect(refreshes.count == 1)
  }

  @Test func aRefresherKilledMidRefreshIsTakenOverByAnotherProcess() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("auth")
    try defaults.set("stale", for: DefaultsKey<String>("token"))
    let countFile = directory.path + "/refreshes"
    let doomed = try Peer(container: directory.path)
    doomed.child.write("drefresh auth token \(countFile) hang")
    try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
    let waiter = try Peer(container: directory.path)
    waiter.child.write("drefresh auth token \(countFile)")
    doomed.kill()
    let answer = try waiter.child.readLine(timeout: 60)
    #expect(answer == "ok fresh-from-\(waiter.pid)")
    #expect(try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n").count == 2)
  }

  @Test func aWaiterGivesUpAtItsTimeoutWhileAnotherProcessRefreshes() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("auth")
    try defaults.set("stale", for: DefaultsKey<String>("token"))
    let countFile = directory.path + "/refreshes"
    let stuck = try Peer(container: directory.path)
    stuck.child.write("drefresh auth token \(countFile) hang")
    try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
    let waiter = try Peer(container: directory.path)
    let started = Date()
    let answer = try waiter.ask("drefresh auth token \(countFile) timeout=300")
    let waited = Date().timeIntervalSince(started)
    #expect(answer.hasPrefix("error timed out"), "\(answer)")
    #expect(waited >= 0.3 && waited < 5, "waited \(waited) s")
  }

  @Test func transactionsAreAtomicAndRollBackOnError() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("tx")
    let a = DefaultsKey<Int>("a")
    let b = DefaultsKey<Int>("b")
    try defaults.transaction { tx in
      try tx.set(1, for: a)
      try tx.set(2, for: b)
    }
    struct Refused: Error {}
    #expect(throws: Refused.self) {
      try defaults.transaction { tx in
        try tx.set(10, for: a)
        throw Refused()
      }
    }
    #expect(try defaults.get(a) == 1)
    #expect(try defaults.get(b) == 2)
    #expect(try defaults.keys() == ["a", "b"])
    try defaults.remove(a)
    #expect(try defaults.get(a) == nil)
  }

  @Test func typedValuesRawDataAndMismatchedTypes() throws {
    struct Token: Codable, Sendable, Equatable {
      var value: String
      var expires: Date
    }
    let defaults = try SharedContainer(directory: directory.path).defaults("types")
    let token = Token(value: "abc", expires: Date(timeIntervalSince1970: 1_800_000_000))
    try defaults.set(token, for: DefaultsKey<Token>("token"))
    #expect(try defaults.get(DefaultsKey<Token>("token")) == token)
    try defaults.set(Data([0, 1, 2]), for: DefaultsKey<Data>("blob"))
    #expect(try defaults.get(DefaultsKey<Data>("blob")) == Data([0, 1, 2]))
    #expect {
      _ = try defaults.get(DefaultsKey<Int>("token"))
    } throws: { ($0 as? LiaisonError)?.code == .typeMismatch }
  }

  @Test func oversizedValuesAndBadKeysAreRefused() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("limits")
    #expect {
      try defaults.set(Data(count: SharedDefaults.maximumValueSize + 1), for: DefaultsKey<Data>("big"))
    } throws: { error in
      let error = error as? LiaisonError
      return error?.code == .tooLarge && error?.message.contains("\(SharedDefaults.maximumValueSize)") == true
    }
    #expect { _ = try DefaultsKey<Int>(validating: "../key") } throws: { ($0 as? LiaisonError)?.code == .invalidName }
    #expect { _ = try SharedContainer(directory: directory.path).defaults("bad domain") } throws: {
      ($0 as? LiaisonError)?.code == .invalidName
    }
  }

  @Test(arguments: ["garbage", "truncated"])
  func aDamagedStoreIsAClearErrorAndIsNotReplaced(_ damage: String) throws {
    // Made in a peer, so that this process has not opened (and cached) the store.
    let maker = try Peer(container: directory.path)
    try maker.send("dset precious key 42")
    maker.kill()
    let file = directory.path + "/.liaison/store/defaults.sqlite"
    for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
    if damage == "garbage" {
      try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: file))
    } else {
      let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
      try handle.truncate(atOffset: 100)
      try handle.close()
    }
    let damaged = try Data(contentsOf: URL(fileURLWithPath: file))
    let reader = try Peer(container: directory.path)
    let answer = try reader.ask("dget precious key")
    #expect(answer.hasPrefix("error corrupt file"), "\(answer)")
    #expect(answer.contains("defaults.sqlite"))
    #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == damaged)
  }
}
