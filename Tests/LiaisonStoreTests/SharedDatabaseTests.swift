import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

@Suite("SharedDatabase across processes")
struct SharedDatabaseTests {
  let directory = TemporaryDirectory()

  @Test func anObservationInOneProcessSeesARowCommittedInAnother() throws {
    let app = try Peer(container: directory.path)
    let share = try Peer(container: directory.path)
    try app.send(.dbopen, "notes", "1")
    try share.send(.dbopen, "notes", "1")
    try app.send(.dbwatch, "notes")
    #expect(try app.send(.dbnext) == "0")
    try share.send(.dbinsert, "notes", "1")
    #expect(try app.send(.dbnext) == "1")
    try share.send(.dbinsert, "notes", "2")
    // Two commits may reach the observation as one change: read until the count settles.
    var last = ""
    repeat { last = try app.send(.dbnext) } while last != "3" && last != "none"
    #expect(last == "3")
  }

  @Test func fourWritersAndTwoReadersNeverSeeBusy() throws {
    let writers = try (0..<4).map { _ in try Peer(container: directory.path) }
    let readers = try (0..<2).map { _ in try Peer(container: directory.path) }
    for peer in writers + readers { try peer.send(.dbopen, "items", "1") }
    for writer in writers { writer.start(.dbinsert, "items", "1000") }
    for reader in readers { try reader.send(.dbwatch, "items") }
    for writer in writers {
      #expect(try writer.child.readLine(timeout: 600) == "ok done")  // an error answer would be SQLITE_BUSY
    }
    for reader in readers {
      #expect(try reader.send(.dbcount, "items") == "4000")
    }
  }

  @Test func fourProcessesOpeningAtOnceRunEachMigrationOnce() throws {
    let countFile = directory.path + "/migrations"
    let peers = try (0..<4).map { _ in try Peer(container: directory.path) }
    for peer in peers { peer.start(.dbopen, "shared", "2", countFile) }
    for peer in peers { #expect(try peer.child.readLine(timeout: 120) == "ok opened") }
    let runs = try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n")
    #expect(runs == ["v1", "v2"])
  }

  @Test func anOlderProgramIsRefusedANewerDatabaseAndChangesNothing() throws {
    let newer = try Peer(container: directory.path)
    try newer.send(.dbopen, "versioned", "2")
    try newer.send(.dbinsert, "versioned", "5")
    newer.kill()
    // The older program knows a migration the newer one never had: refused before running it.
    let countFile = directory.path + "/migrations"
    let older = try Peer(container: directory.path)
    let answer = try older.ask(.dbopen, "versioned", "1", countFile, "legacy")
    #expect(answer.hasPrefix("error incompatible schema"), "\(answer)")
    #expect(answer.contains("versioned.sqlite"))
    // Nothing changed: the newer program opens it as it left it, its migrations not run again.
    let reopened = try Peer(container: directory.path)
    try reopened.send(.dbopen, "versioned", "2", countFile)
    #expect(try reopened.send(.dbcount, "versioned") == "5")
    #expect(!FileManager.default.fileExists(atPath: countFile))
  }
}
