import Foundation
import Liaison
import LiaisonTestSupport
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model
import Testing

/// A presence's model on a folder, in every build (no trait): it follows another process's claim
/// and its holder's SIGKILL.
@Suite("ObservedPresence on a folder")
@MainActor struct ObservedPresenceTests {
  let directory = TemporaryDirectory()

  @Test(.enabled(if: modelsExist))
  func aPresenceFollowsAClaimAndItsHoldersDeath() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let container = try SharedContainer(directory: directory.path)
    let recording = try await ObservedPresence(try container.presence("recording"))
    #expect(!recording.isActive)
    let holder = try Peer(container: directory.path)
    try holder.send(.claim, "recording", "episode", "7")
    try await until(
      "the model shows the claim", observing: { recording.holder },
      satisfies: { $0?.processID == holder.pid && $0?.info == "episode 7" })
    holder.kill()
    try await until("the model shows the presence released", observing: { recording.isActive }, satisfies: { !$0 })
  }
}
