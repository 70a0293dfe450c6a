import Foundation
import Liaison
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A sandbox refuses a write with `EPERM` or `EACCES` (a read-only mount with `EROFS`, which
/// `ReadOnlyContainerTests` covers): either is the container being read-only for this process.
@Suite("Writes the system refuses")
struct ReadOnlyErrorTests {
  @Test(.enabled(if: isLinux || !isRoot, "as root, refusing a write needs Linux's immutable attribute"))
  func aRefusedWriteSaysTheContainerIsReadOnlyAndReadsGoOn() throws {
    let directory = TemporaryDirectory()
    let writer = try SharedContainer(directory: directory.path)
    try writer.presence("recording").claim().release()
    try writer.signal("ready").post(state: 3)
    let liaison = directory.path + "/.liaison"
    let refusals = try [
      WriteRefusal(liaison + "/presence/recording"), WriteRefusal(liaison + "/presence"),
      WriteRefusal(liaison + "/signals/ready"), WriteRefusal(liaison + "/locks"),
    ]
    defer { for refusal in refusals { refusal.end() } }
    let expected = refusals[0].errno

    let reader = try SharedContainer(directory: directory.path)
    #expect(try reader.presence("recording").isActive == false)
    let ready = try reader.signal("ready")
    #expect(try ready.state == 3)

    let writes: [(String, () throws -> Void)] = [
      ("a claim", { _ = try reader.presence("recording").claim() }),
      ("a new presence's claim", { _ = try reader.presence("new").claim() }),
      ("a lease", { _ = try reader.presence("recording").lease(for: .seconds(1)) }),
      ("a post", { try ready.post(state: 4) }),
      ("a lock", { _ = try reader.lock("refresh").tryLock() }),
    ]
    for (what, write) in writes {
      let error = try #require(throws: LiaisonError.self, "\(what)") { try write() }
      #expect(error.code == .readOnly, "\(what): \(error)")
      #expect(error.errno?.rawValue == expected, "\(what): \(error)")
      #expect(error.message.contains("read-only for this process"), "\(what): \(error)")
    }
    #expect(try ready.state == 3)
  }
}
