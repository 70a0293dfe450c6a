import Foundation
import Liaison
import LiaisonTestSupport
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models
import Testing

/// A signal's model on a folder, in every build (no trait).
@Suite("ObservedSignal on a folder")
@MainActor struct ObservedSignalTests {
  let directory = TemporaryDirectory()

  /// Another process's plain `post()`, which keeps the state, still changes what the model shows:
  /// its `sequence`, which a view or a widget's reload follows.
  @Test(.enabled(if: modelsExist))
  func aPostThatKeepsTheStateChangesTheSequence() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let container = try SharedContainer(directory: directory.path)
    let saved = try await ObservedSignal(try container.signal("links-saved"))
    let before = saved.sequence
    let poster = try Peer(container: directory.path)
    for posts in 1...3 {
      let changed = changeOf { _ = saved.sequence }
      try poster.send(.post, "links-saved")
      try await waitForChange(changed, "the sequence's change after post \(posts)")
      try await until(
        "the sequence counts the post", observing: { saved.sequence }, satisfies: { $0 == before + UInt64(posts) })
    }
    #expect(saved.state == 0, "a plain post keeps the state")
  }
}
