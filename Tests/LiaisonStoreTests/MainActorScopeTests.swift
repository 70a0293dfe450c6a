import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

/// The scoped forms run their body in the caller's isolation: an app calls them from the main
/// actor (a button's action), with a body that reads and writes the view's state, and it compiles
/// under Swift 6 (this target is in language mode 6) and runs.
@MainActor
final class RecordingScreen {
  var status = "idle"
  var log: [String] = []

  func record(_ presence: Presence) async throws {
    try await presence.withClaim(info: "episode-7") { claim in
      status = "recording"
      log.append("claimed \(claim.isHeld)")
    }
    status = "idle"
  }

  func refreshToken(_ lock: ProcessLock) async throws {
    let token = try await lock.withLock {
      log.append("refreshing")
      return "token-\(log.count)"
    }
    log.append(token)
  }

  func handle(_ mailbox: Mailbox) async throws {
    try await mailbox.withReceiver { receiver in
      for envelope in try await receiver.receive(String.self, limit: 10, timeout: .zero) {
        log.append(envelope.payload)
        try await receiver.acknowledge(envelope)
      }
    }
  }
}

@Suite("Scoped forms from the main actor")
struct MainActorScopeTests {
  let directory = TemporaryDirectory()

  @Test @MainActor func aClaimALockAndAReceiverRunTheirBodiesOnTheMainActor() async throws {
    let container = try SharedContainer(directory: directory.path)
    let screen = RecordingScreen()
    let observer = try Peer(container: directory.path)

    try await screen.record(container.presence("recording"))
    #expect(screen.log == ["claimed true"])
    #expect(screen.status == "idle")
    #expect(try observer.send(.active, "recording") == "false")

    try await screen.refreshToken(container.lock("token-refresh"))
    #expect(screen.log.suffix(2) == ["refreshing", "token-2"])

    let inbox = try await container.mailbox("inbox", sender: "share-extension")
    try await inbox.send("a link")
    try await screen.handle(inbox)
    #expect(screen.log.last == "a link")
    #expect(try inbox.count() == 0)
  }
}
