// An app and its extensions in one App Group: the container they share, what each side does, and
// suspend()/resume() in the app's lifecycle. The SwiftUI part is compiled where SwiftUI exists
// (the macOS build); the rest everywhere.
// snippet.hide
import Foundation
import Liaison
import LiaisonStore

struct SavedLink: Codable, Sendable { let url: URL }
func save(_ link: SavedLink) throws {}
func recordEpisode() throws {}

#if canImport(Darwin)
  // snippet.show
  // snippet.container
  // The same line in the app, the widget and the share extension:
  let container = try SharedContainer(appGroup: "group.com.example.notes")
// snippet.end
// snippet.hide
#else
  let container = try SharedContainer(
    directory: NSTemporaryDirectory() + "group.com.example.notes", createIfMissing: true)
#endif

// snippet.show
// snippet.share
// In the share extension: hand the link to the app, whether or not the app is running.
func share(_ url: URL) async throws {
  let inbox = try await container.mailbox("inbox", sender: "share-extension")
  try await inbox.send(SavedLink(url: url), id: url.absoluteString)  // a retried share is stored once
  try container.signal("links-changed").post()  // a running app may refresh at once
}
// snippet.end
// snippet.hide

// snippet.show
// snippet.widget
// In the widget's timeline provider: read the state, never wait long.
func widgetEntry() throws -> (isRecording: Bool, theme: String?) {
  let isRecording = try container.presence("recording").isActive
  let settings = try container.defaults("settings", timeout: .seconds(1))
  return (isRecording, try settings.get(DefaultsKey<String>("theme")))
}
// snippet.end
// snippet.hide

// snippet.show
// snippet.app
// In the app: take the links the extension left, acknowledging each once it is saved.
func receiveSharedLinks() async throws {
  let receiver = try await container.mailbox("inbox").receiver()
  for try await envelope in receiver.messages(SavedLink.self) {
    try save(envelope.payload)
    try await receiver.acknowledge(envelope)
  }
  // After `suspend()` the loop throws `suspended`: start it again after `resume()`.
}

// While it records (with the audio background mode, the app keeps running):
func record() throws {
  let claim = try container.presence("recording").claim(info: "episode 7")
  defer { claim.release() }
  try recordEpisode()
}

// For "the app is open", which must survive suspension: a lease, renewed while the app runs.
func markOpen() throws -> PresenceLease {
  try container.presence("app-open").lease(for: .seconds(30))
}
// snippet.end
// snippet.hide

#if canImport(SwiftUI)
  import SwiftUI

  // snippet.show
  // snippet.lifecycle
  @available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
  struct NotesApp: App {
    @Environment(\.scenePhase) private var scenePhase

    var body: some Scene {
      WindowGroup {
        Text("Notes")
      }
      .onChange(of: scenePhase) { _, phase in
        switch phase {
        case .background:
          container.suspend()  // no lock, claim or wait of this process is left in the App Group
        case .active:
          try? container.resume()  // the claims back, the leases renewed
        default:
          break
        }
      }
    }
  }
// snippet.end
// snippet.hide
#endif
