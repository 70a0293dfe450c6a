// The views of *Up to the View*: SwiftUI views that show what other processes do, and the code
// around them. The article shows slices of this file, which the package builds: `swift build` on
// Linux compiles what needs no SwiftUI, a Mac's (.ci/apple-build) the views and the intent too.
// snippet.hide
import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonSwiftUI

#if canImport(AppIntents)
  import AppIntents
#endif
#if canImport(SwiftUI)
  import SwiftUI
#endif
#if canImport(WidgetKit)
  import WidgetKit
#else
  /// Where WidgetKit does not exist (Linux): a stand-in for the one call the article makes.
  final class WidgetCenter: Sendable {
    static let shared = WidgetCenter()
    func reloadTimelines(ofKind kind: String) {}
  }
#endif

// The reader's own code, as the article names it.
struct SavedLink: Codable, Sendable {
  let title: String
  let url: String
}
func loadNotes() async -> [String] { [] }

#if canImport(Darwin)
  let container = try SharedContainer(appGroup: "group.com.example.notes")
#else
  let container = try SharedContainer(directory: NSTemporaryDirectory() + "up-to-the-view", createIfMissing: true)
#endif

// snippet.show
// snippet.share
// In the share extension: the link for the app, then the widget told by the process that changed
// its data.
func share(_ link: SavedLink) async throws {
  let inbox = try await container.mailbox("shared-links", sender: "share-extension")
  try await inbox.send(link, id: link.url)  // a retried share is stored once
  WidgetCenter.shared.reloadTimelines(ofKind: "Links")
}
// snippet.end

// snippet.hide
#if canImport(AppIntents)
  // snippet.show
  // snippet.intent
  // The widget's button runs this intent, in the widget's process or the app's.
  struct ChooseTheme: AppIntent {
    static var title: LocalizedStringResource { "Choose a Theme" }
    @Parameter(title: "Theme") var theme: String

    func perform() async throws -> some IntentResult {
      try await chooseTheme(theme)
      return .result()
    }
  }
// snippet.end
// snippet.hide
#endif

// snippet.show
// snippet.choose-theme
// It stores the theme, then tells WidgetKit itself: this process changed the data. The app's
// `@SharedValue` shows the new theme at its next frame.
func chooseTheme(_ theme: String) async throws {
  try await container.defaults("settings").set(theme, for: DefaultsKey<String>("theme"))
  WidgetCenter.shared.reloadTimelines(ofKind: "Theme")
}
// snippet.end
// snippet.hide

// View models, where Observation exists: the same logic as the view properties.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor func openModels() async throws {
  // snippet.show
  // snippet.models
  // In a view model (iOS 17): @Observable classes that follow the same parts.
  let recording = try await ObservedPresence(try container.presence("recording"))
  let theme = try await ObservedValue(DefaultsKey<String>("theme"), in: try await container.defaults("settings"))
  theme.set("dark")  // no `await` in a view's action; `try await theme.set("dark").value` to know it stored
  // snippet.end
  // snippet.hide
  _ = recording
}

#if canImport(SwiftUI)
  // snippet.show
  // snippet.root
  // Once, at the root of each process's views: the app's scenes, the widget's, the keyboard's.
  struct NotesApp: App {
    var body: some Scene {
      WindowGroup {
        LinksList().liaisonContainer(container)
      }
    }
  }
  // snippet.end

  // snippet.setting
  // In the app: the theme as any process last wrote it; the picker writes it for every process.
  struct ThemePicker: View {
    @SharedValue("theme", in: "settings") var theme = "system"

    var body: some View {
      Form {
        Picker("Theme", selection: $theme) {
          Text("System").tag("system")
          Text("Dark").tag("dark")
        }
        if let error = _theme.error { Text(error.message) }  // a refused write, no container
      }
    }
  }
  // snippet.end

  // snippet.keyboard
  // In the keyboard extension: is the app recording? Reading needs no Full Access.
  struct KeyboardBar: View {
    @SharedPresence("recording") var isRecording: Bool

    var body: some View {
      if isRecording {
        Label($isRecording.holder?.info ?? "Recording", systemImage: "record.circle")
      }
    }
  }
  // snippet.end

  // snippet.inbox
  // In the app: the links the share extension saved, even while the app was not running.
  struct LinksList: View {
    @SharedInbox("shared-links", sender: "app") var links: [MailboxEnvelope<SavedLink>]

    var body: some View {
      List(links, id: \.id) { link in
        Text(link.payload.title)
          .swipeActions {
            Button("Done") {
              Task {
                try await $links.acknowledge([link]).value  // gone for good, for every receiver
                WidgetCenter.shared.reloadTimelines(ofKind: "Links")  // in the foreground: not counted
              }
            }
          }
      }
      .overlay { if let error = $links.error { Text(error.message) } }
    }
  }
  // snippet.end

  // snippet.signal
  // In the app: notes that other processes change, each change followed by a post.
  struct NotesList: View {
    @SharedSignal("notes-changed") var notesChanged
    @State private var notes: [String] = []

    var body: some View {
      List(notes, id: \.self) { Text($0) }
        .task(id: notesChanged) { notes = await loadNotes() }  // again after every post
    }
  }
  // snippet.end

  // snippet.database
  // In the app: rows of a shared database, fetched again after any process's commit. GRDB alone.
  struct JournalList: View {
    let journal: SharedDatabase
    @State private var entries: [String] = []

    var body: some View {
      List(entries, id: \.self) { Text($0) }
        .task {
          let observation = ValueObservation.tracking { db in
            try String.fetchAll(db, sql: "SELECT text FROM entry")
          }
          do {
            for try await fetched in observation.values(in: journal.pool) { entries = fetched }
          } catch {
            // The pool was closed (before a `suspend()`, say): observe the new one.
          }
        }
    }
  }
  // snippet.end

  // snippet.preview
  // A preview: a throwaway container, in one line.
  struct ThemePickerPreview: PreviewProvider {
    static var previews: some View {
      ThemePicker().liaisonContainer(try! SharedContainer.temporary())
    }
  }
// snippet.end
#endif
