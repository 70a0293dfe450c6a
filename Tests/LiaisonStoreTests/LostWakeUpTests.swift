import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

/// A writer killed (a real `SIGKILL`) after its commit and before it rang the signal: the other
/// processes' observers are told all the same, when its descriptors close, without polling.
@Suite("Lost wake-ups in the store")
struct LostWakeUpTests {
  let directory = TemporaryDirectory()

  @Test func aDefaultsWriterKilledBetweenCommitAndRingStillWakesChangesOfKey() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    try reader.send("dwatch settings volume")
    #expect(try reader.send("dnext") == "nil")
    try writer.send("dset settings volume 3")
    #expect(try reader.send("dnext") == "3")

    try writer.send("die-before-ring")
    writer.child.write("dset settings volume 5")
    writer.child.wait()
    #expect(try reader.send("dget settings volume") == "5")  // committed
    #expect(try reader.send("dnext 10000") == "5")
  }

  @Test func aDatabaseWriterKilledBetweenCommitAndRingStillRefreshesObservations() throws {
    let reader = try Peer(container: directory.path)
    let writer = try Peer(container: directory.path)
    try reader.send("dbopen notes 1")
    try writer.send("dbopen notes 1")
    try reader.send("dbwatch notes")
    #expect(try reader.send("dbnext") == "0")
    try writer.send("dbinsert notes 1")
    #expect(try reader.send("dbnext") == "1")

    try writer.send("die-before-ring")
    writer.child.write("dbinsert notes 1")
    writer.child.wait()
    #expect(try reader.send("dbnext 10000") == "2")
    #expect(try reader.send("dbcount notes") == "2")  // committed
  }

  @Test func changesOfAKeyThrowsWhenTheValueCannotBeRead() async throws {
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("settings")
    try defaults.set(42, for: DefaultsKey<Int>("volume"))
    var values = try defaults.changes(of: DefaultsKey<String>("volume")).makeAsyncIterator()
    await #expect(throws: LiaisonError.self) {
      let value = try await values.next()
      Issue.record("the sequence gave \(String(describing: value)) instead of throwing")
    }
  }
}
