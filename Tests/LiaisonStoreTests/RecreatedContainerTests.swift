import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

@Suite("A container folder deleted and made again")
struct RecreatedContainerTests {
  /// On ext4 a folder deleted and made again at once usually gets the same inode back; Liaison's
  /// per-process registries are keyed by inode, and must not hand the new container the deleted
  /// one's state (its suspension).
  @Test func aNewContainerWhereADeletedOneWasStartsFresh() throws {
    let parent = TemporaryDirectory()
    let path = parent.path + "/container"
    let volume = DefaultsKey<Int>("volume")
    var reused = false
    for _ in 0..<10 where !reused {
      do {
        // (No store opened here: an open store keeps its container, and so the folder, open.)
        try SharedContainer(directory: path, createIfMissing: true).suspend()
      }  // released: nothing of this process keeps the folder open, so its inode can come back
      let before = try inode(of: path + "/.liaison")
      try FileManager.default.removeItem(atPath: path)
      let container = try SharedContainer(directory: path, createIfMissing: true)
      reused = try inode(of: path + "/.liaison") == before
      // Fresh whether or not the inode came back (which is the case that matters).
      let claim = try container.presence("fresh").claim()  // a suspended container would refuse
      claim.release()
      let defaults = try container.defaults("settings")
      #expect(try defaults.get(volume) == nil)
      try defaults.set(2, for: volume)  // the deleted store would refuse it
      #expect(try defaults.get(volume) == 2)
    }
  }
}

private func inode(of path: String) throws -> UInt64 {
  var info = stat()
  guard stat(path, &info) == 0 else { throw PeerError("cannot stat \(path)") }
  return UInt64(info.st_ino)
}
