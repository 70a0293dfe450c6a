import Foundation
import Liaison
import LiaisonStore
import LiaisonSwiftUI
import LiaisonTestSupport
import Testing

// SwiftUI's model hosts the views (on Linux only: a Mac builds LiaisonSwiftUI against SwiftUI,
// where these tests do not compile).
#if canImport(SwiftUIModel)
  import SwiftUIModel

  /// What the test peer's `msend` sends.
  struct PeerMessage: Codable, Sendable {
    let sender: String
    let n: Int
  }

  /// A keyboard's bar, showing whether the app records.
  struct RecordingBar: View {
    @SharedPresence("recording") var isRecording: Bool

    var body: Text { Text(isRecording ? "recording \($isRecording.holder?.info ?? "")" : "idle") }
  }

  /// A list read again after every post of a signal.
  struct NotesList: View {
    @SharedSignal("notes-changed") var notesChanged

    var body: Text { Text("\(notesChanged) \($notesChanged.state)") }
  }

  /// An app's list of what a share extension sent.
  struct LinksList: View {
    @SharedInbox("links", sender: "app") var links: [MailboxEnvelope<PeerMessage>]

    var body: Text { Text(links.map { "\($0.payload.n)" }.joined(separator: " ")) }

    /// What a row's "Done" button does.
    func done(_ link: MailboxEnvelope<PeerMessage>) -> Task<Void, any Error> { $links.acknowledge([link]) }
    var waitingCount: Int { $links.waitingCount }
  }

  /// The view properties `SharedPresence`, `SharedSignal` and `SharedInbox`, in views hosted as
  /// SwiftUI hosts them (on Linux, SwiftUI's model), on a folder, against other processes.
  @Suite("SharedPresence, SharedSignal and SharedInbox in a view")
  @MainActor struct ViewPropertyTests {
    let directory = TemporaryDirectory()

    /// The first frame shows another process's claim; its SIGKILL redraws the view as idle.
    @Test func aPresenceShowsAClaimAtTheFirstFrameAndItsHoldersDeath() async throws {
      let container = try SharedContainer(directory: directory.path)
      let holder = try Peer(container: directory.path)
      try holder.send(.claim, "recording", "episode", "7")
      let host = ViewHost(RecordingBar().liaisonContainer(container))
      #expect(host.body as? Text == Text("recording episode 7"))
      holder.kill()
      try await evaluations(of: host, until: Text("idle"))
    }

    /// Every post redraws the view (a burst may come as one), which ends on the last post's
    /// sequence and state.
    @Test func aSignalRedrawsTheViewAfterPosts() async throws {
      let container = try SharedContainer(directory: directory.path)
      let host = ViewHost(NotesList().liaisonContainer(container))
      #expect(host.body as? Text == Text("0 0"))
      let poster = try Peer(container: directory.path)
      for state in [3, 4, 5] { try poster.send(.post, "notes-changed", "\(state)") }
      try await evaluations(of: host, until: Text("3 5"))
      // A plain post keeps the state and still redraws the view: its sequence moves.
      try poster.send(.post, "notes-changed")
      try await evaluations(of: host, until: Text("4 5"))
    }

    /// An inbox shows another process's sends; acknowledging removes one; after the container's
    /// `suspend()` and `resume()` the messages come again.
    @Test func anInboxShowsSendsAndSurvivesASuspension() async throws {
      let container = try SharedContainer(directory: directory.path)
      let view = LinksList()
      let host = ViewHost(view.liaisonContainer(container))
      let sender = try Peer(container: directory.path)
      try sender.send(.msend, "links", "web", "3")
      try await evaluations(of: host, until: Text("0 1 2"))
      #expect(view.waitingCount == 3)
      try await view.done(view.links[0]).value
      try await evaluations(of: host, until: Text("1 2"))
      #expect(view.waitingCount == 2)

      container.suspend()
      try await evaluations(of: host, until: Text(""))
      try container.resume()
      try await evaluations(of: host, until: Text("1 2"))
    }

    /// A second inbox on the same mailbox (another window) shows nothing while the first has it,
    /// and takes over when the first's view goes away.
    @Test func aSecondInboxWaitsAndTakesOver() async throws {
      let container = try SharedContainer(directory: directory.path)
      var first: ViewHost? = ViewHost(LinksList().liaisonContainer(container))
      let second = ViewHost(LinksList().liaisonContainer(container))
      let sender = try Peer(container: directory.path)
      try sender.send(.msend, "links", "web", "2")
      try await evaluations(of: try #require(first), until: Text("0 1"))
      #expect(second.body as? Text == Text(""))
      first = nil
      try await evaluations(of: second, until: Text("0 1"))
    }

  }
#endif
