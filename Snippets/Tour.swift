// A short tour of the parts: the README and the DocC pages show the slices of this file, which
// the package builds (`swift build`), so that a renamed API breaks the build, not the docs.
//
// Each slice sits in an `async` function, where a reader's code is (the `async` forms are the
// ones chosen there), with nothing declared around it but the stand-ins that the README names for
// the reader's own code.
// snippet.hide
import Foundation
import GRDB
import Liaison
import LiaisonStore

// The reader's own code, as the README names it.
struct OAuthToken: Codable, Equatable, Sendable {
  var value: String
  var expiresAt: Date
  var isExpired: Bool { expiresAt < Date() }
}
func readToken() throws -> OAuthToken { OAuthToken(value: "", expiresAt: Date()) }
func writeToken(_ token: OAuthToken) throws {}
func fetchNewToken() async throws -> OAuthToken { try readToken() }
func recordEpisode() async throws {}
func reloadNotes(since revision: UInt64) {}
func save<Item>(_ item: Item) throws {}
func show<Value>(_ value: Value) {}
let revision: UInt64 = 1
let url = URL(fileURLWithPath: "/")
let account = "ada"

func presenceTour() async throws {
  // snippet.show
  // snippet.presence
  let container = try SharedContainer(directory: "/var/run/recorder")  // or appGroup: on Apple platforms
  let recording = try container.presence("recording")

  // In the app, for as long as it records (released when the body ends, at once if the app dies):
  try await recording.withClaim(info: "episode 7") { _ in try await recordEpisode() }

  // In the widget, or any other process:
  if let holder = try recording.holder {
    print("recording in pid \(holder.processID): \(holder.info ?? "")")
  }
  let running = try recording.isActive  // a non-blocking probe, about 2 µs
  // snippet.hide
  show(running)
  // snippet.end
}

func lockTour(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.lock
  let refresh = try container.lock("token-refresh")
  try await refresh.withLock(timeout: .seconds(10)) {
    let token = try readToken()
    if token.isExpired { try writeToken(await fetchNewToken()) }  // re-check under the lock
  }
  // snippet.end
  // snippet.hide
}

func signalTour(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.signal
  // In the share extension, after saving:
  try container.signal("notes-changed").post(state: revision)

  // In the app:
  for await note in try container.signal("notes-changed").notifications(ignoringOwnPosts: true) {
    reloadNotes(since: note.state)
  }
  // Or, with a callback, from code that is not async too:
  let observation = try container.signal("notes-changed").observe(on: .main) { reloadNotes(since: $0.state) }
  // snippet.hide
  show(observation)
  // snippet.end
}

// snippet.show
// snippet.defaults-keys
extension DefaultsKey where Value == OAuthToken { static let token = DefaultsKey("oauth-token") }
// snippet.end
// snippet.hide

func defaultsTour(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.defaults
  let auth = try await container.defaults("auth")
  try await auth.set(try await fetchNewToken(), for: .token)  // every process sees it once this returns
  let current = try auth.get(.token)  // from this process's cache: about 0.1 µs
  let launches = try await auth.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }  // atomic; the new value
  let lastSync = try DefaultsKey<Date>(validating: "last-sync-\(account)")  // a name made at run time, checked

  // The app, the widget and the keyboard all find the token expired at once: one refresh.
  let fresh = try await auth.refresh(
    .token, timeout: .seconds(10), isFresh: { !$0.isExpired }, using: { try await fetchNewToken() })

  for try await value in try await auth.changes(of: .token) { show(value) }  // now, then each change
  // snippet.hide
  show((current, launches, lastSync, fresh))
  // snippet.end
}

func mailboxTour(_ container: SharedContainer) async throws {
  // snippet.show
  // snippet.mailbox
  struct SavedLink: Codable, Sendable { let url: URL }

  // In the share extension, whether or not the app is running:
  let inbox = try await container.mailbox("inbox", sender: "share-extension")
  try await inbox.send(SavedLink(url: url), id: url.absoluteString)  // a retry with the same id stores nothing

  // In the app, the mailbox's one receiver:
  let receiver = try inbox.receiver()
  for try await envelope in receiver.messages(SavedLink.self) {
    try save(envelope.payload)  // envelope: id, sentAt, sender, payload
    try await receiver.acknowledge(envelope)  // gone for good, for every receiver
  }
  // snippet.end
  // snippet.hide
}

func databaseTour(_ container: SharedContainer) async throws {
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
    try db.execute(sql: "INSERT INTO entry (text) VALUES (?)", arguments: [url.absoluteString])
  }

  // In the app, this GRDB observation updates when the extension commits:
  let entries = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT text FROM entry") }
  for try await list in entries.values(in: journal.pool) { show(list) }
  // snippet.end
  // snippet.hide
}

func runReport() async throws {}

// snippet.show
// snippet.backend
// Written once against the protocols: the same code on a folder and on PostgreSQL.
func nightly(in place: some CoordinationStore) async throws {
  try await place.lock("nightly-report").withLock { try await runReport() }  // once at a time
  try await place.defaults("reports").update(DefaultsKey<Int>("runs")) { ($0 ?? 0) + 1 }
}
// snippet.end
// snippet.hide

func backendTour() async throws {
  // snippet.show
  // snippet.backend-open
  let place = try SharedContainer(directory: "/var/run/reports")  // one machine
  // let place = try await PostgresContainer(url: "postgres://app@db.internal/app", namespace: "billing")
  try await nightly(in: place)
  // snippet.end
  // snippet.hide
}
