// The models of *Up to the View*: what a view shows, following other processes. The article
// shows the slices of this file, which the package builds (`swift build`); the SwiftUI views are
// compiled where SwiftUI exists, the rest everywhere.
// snippet.hide
import Liaison
import LiaisonStore
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models

#if canImport(SwiftUI)
  import SwiftUI
#endif

// The reader's own types, as the article names them.
struct SavedLink: Codable, Sendable {
  let title: String
  let url: String
}
func reloadWidgets() {}

@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor func openModels(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.models
  // In the keyboard extension: is the app recording?
  let recording = try await ObservedPresence(try container.presence("recording"))

  // In the app: the links the share extension saved, even while the app was not running.
  let links = try await ObservedInbox(
    try await container.mailbox("shared-links", sender: "app"), of: SavedLink.self)

  // Anywhere: a setting every process writes and every view shows.
  let theme = try await ObservedValue(DefaultsKey<String>("theme"), in: try await container.defaults("settings"))
  theme.set("dark")  // no `await` needed in a view's action; `try await theme.set("dark").value` to know it stored
  // snippet.end
  // snippet.hide
  _ = (recording, links)
}

@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor func followForAWidget(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.widget
  // In the app, in the foreground (where WidgetKit does not count reloads): a reload after each
  // update of the share extension's signal. The extension reloads the widget itself after it saves.
  let saved = try await ObservedSignal(try container.signal("links-saved"))
  reloadWidgets(afterEachUpdateOf: saved)
  // snippet.end
  // snippet.hide
}

// snippet.show
// snippet.widget-reload
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor func reloadWidgets<Part>(afterEachUpdateOf saved: ObservedSignal<Part>) {
  withObservationTracking {
    _ = saved.sequence  // every post changes it; a plain `post()` keeps `state`
  } onChange: {
    Task { @MainActor in
      reloadWidgets()  // WidgetCenter.shared.reloadTimelines(ofKind: "Links")
      reloadWidgets(afterEachUpdateOf: saved)
    }
  }
}
// snippet.end

#if canImport(SwiftUI)
  // snippet.show
  // snippet.views
  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  struct RecordingBadge<Part: CoordinationPresence>: View {
    let recording: ObservedPresence<Part>

    var body: some View {
      if recording.isActive { Label("Recording", systemImage: "record.circle") }
    }
  }

  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  struct LinksList<Inbox: CoordinationMailbox>: View {
    let links: ObservedInbox<Inbox, SavedLink>

    var body: some View {
      List(links.messages, id: \.id) { envelope in
        HStack {
          Text(envelope.payload.title)
          Button("Done") { links.acknowledge([envelope]) }
        }
      }
      .overlay { if let error = links.error { Text(error.message) } }
    }
  }
// snippet.end
#endif
