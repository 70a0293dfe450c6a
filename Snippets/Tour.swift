// A short tour of the parts: the README and the DocC pages show the slices of this file, which
// the package builds (`swift build`), so that a renamed API breaks the build, not the docs.
// snippet.hide
import Foundation
import GRDB
import Liaison
import LiaisonStore

struct OAuthToken: Codable, Equatable, Sendable {
  var value: String
  var expiresAt: Date
  var isExpired: Bool { expiresAt < Date() }
}
struct Draft { let id = "draft-1" }
struct API { func refreshToken() async throws -> OAuthToken { OAuthToken(value: "", expiresAt: Date()) } }
struct Library { func add<Item>(_ item: Item) throws {} }

func readToken() throws -> OAuthToken { OAuthToken(value: "", expiresAt: Date()) }
func writeToken(_ token: OAuthToken) throws {}
func fetchNewToken() async throws -> OAuthToken { try readToken() }
func reloadNotes(since revision: UInt64) {}
func reload(_ revision: UInt64) {}
func show<Value>(_ value: Value) {}

let api = API()
let library = Library()
let draft = Draft()
let url = URL(fileURLWithPath: "/")
let revision: UInt64 = 1
let link = "https://example.com"
let token = OAuthToken(value: "", expiresAt: Date())

// snippet.show
// snippet.presence
let container = try SharedContainer(directory: "/var/run/recorder")  // or appGroup: on Apple platforms
let recording = try container.presence("recording")

// In the app, for as long as it records:
let claim = try recording.claim(info: "episode 7")
defer { claim.release() }

// In the widget, or any other process:
if let holder = try recording.holder {
  print("recording in pid \(holder.processID): \(holder.info ?? "")")
}
let running = try recording.isActive  // a non-blocking probe, about 2 µs
// snippet.end
// snippet.hide

// snippet.show
// snippet.lock
let refresh = try container.lock("token-refresh")
try await refresh.withLock(timeout: .seconds(10)) {
  let token = try readToken()
  if token.isExpired { try writeToken(await fetchNewToken()) }  // re-check under the lock
}
// snippet.end
// snippet.hide

// snippet.show
// snippet.signal
// In the share extension, after saving:
try container.signal("notes-changed").post(state: revision)

// In the app:
for await note in try container.signal("notes-changed").notifications(ignoringOwnPosts: true) {
  reloadNotes(since: note.state)
}
// Or, from code that is not async:
let observation = try container.signal("notes-changed").observe(on: .main) { note in reload(note.state) }
// snippet.end
// snippet.hide

// snippet.show
// snippet.defaults-keys
extension DefaultsKey where Value == OAuthToken { static let token = DefaultsKey("oauth-token") }
// snippet.end
// snippet.hide

func defaultsTour() async throws {
  // snippet.show
  // snippet.defaults
  let auth = try await container.defaults("auth")
  try await auth.set(token, for: .token)  // every process sees it once this returns
  let current = try auth.get(.token)  // about 0.1 µs, from the cache
  try await auth.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }  // atomic across processes

  // The app, the widget and the keyboard all find the token expired at once: one refresh.
  let fresh = try await auth.refresh(
    .token, timeout: .seconds(10), isFresh: { !$0.isExpired }, using: { try await api.refreshToken() })

  for try await value in try auth.changes(of: .token) { show(value) }  // now, then each change
  // snippet.hide
  show((current, fresh))
  // snippet.end
}
// snippet.show

// snippet.hide
func mailboxTour() async throws {
  // snippet.show
  // snippet.mailbox
  struct SavedLink: Codable, Sendable { let url: URL }

  // In the share extension, whether or not the app is running:
  let inbox = try await container.mailbox("inbox", sender: "share-extension")
  try await inbox.send(SavedLink(url: url), id: draft.id)  // a retry with the same id stores nothing

  // In the app, the mailbox's one receiver:
  let receiver = try inbox.receiver()
  for try await envelope in receiver.messages(SavedLink.self) {
    try library.add(envelope.payload)  // envelope: id, sentAt, sender, payload
    try await receiver.acknowledge(envelope)  // gone for good, for every receiver
  }
  // snippet.end
  // snippet.hide
}
// snippet.show

// snippet.hide
func databaseTour() async throws {
  // snippet.show
  // snippet.database
  var migrator = DatabaseMigrator()
  migrator.registerMigration("v1") { db in
    try db.create(table: "entry") { t in
      t.autoIncrementedPrimaryKey("id")
      t.column("text", .text)
    }
  }
  let journal = try await container.database("journal", migrator: migrator)  // journal.pool: a DatabasePool

  // In the share extension:
  try await journal.pool.write { db in
    try db.execute(sql: "INSERT INTO entry (text) VALUES (?)", arguments: [link])
  }

  // In the app, this GRDB observation updates when the extension commits:
  let entries = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT text FROM entry") }
  for try await list in entries.values(in: journal.pool) { show(list) }
  // snippet.end
  // snippet.hide
}
// snippet.show
