import ArgumentParser
import ChildProcesses
import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonSwiftUI
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the view scene

#if canImport(SwiftUIModel)
  import SwiftUIModel  // Linux: the view scene's view runs in SwiftUI's model
#endif

struct DemoCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo",
    abstract: "Watch an app and its extensions coordinate through Liaison, narrated step by step.",
    discussion: """
      Runs in a temporary container that it removes afterwards. Each actor is a real process (this \
      program, started again), and the crash is a real SIGKILL.

      \(DocsPage.demo)
      """
  )

  func run() async throws {
    try await Self.reporting {
      let directory = try makeTemporaryDirectory()
      defer { try? FileManager.default.removeItem(atPath: directory) }
      let container = try SharedContainer(directory: directory)
      try printLine("Liaison demo, in a temporary container at \(directory)\n")
      try recordingScene(container)
      try tokenScene(container)
      try await doorbellScene(container)
      try databaseScene(container)
      try inboxScene(container)
      try await viewScene(container)
      try printLine("Done; the temporary container is removed.")
    }
  }

  /// Question 1: is the app recording right now?
  private func recordingScene(_ container: SharedContainer) throws {
    try printLine("1. Is the app recording right now?  (Presence)")
    let recording = try container.presence("recording")
    try say("widget", "is \"recording\" active? \(try describe(recording))")

    let app = try DemoActor(role: "recorder", container: container)
    try app.expect("claimed")
    try say("app", "starts recording and claims \"recording\" (pid \(app.pid))")
    try say("widget", "is \"recording\" active? \(try describe(recording))")

    app.crash()
    try say("app", "crashes: killed with SIGKILL, no time to clean up")
    try say("widget", "is \"recording\" active? \(try describe(recording))")
    try printLine("   The kernel released the claim when the app died: no stale \"running\" flag.\n")
  }

  /// Question 2: only one process may refresh the token.
  private func tokenScene(_ container: SharedContainer) throws {
    try printLine("2. Three processes find the token expired at once; who refreshes it?  (SharedDefaults.refresh)")
    let auth = try container.defaults("auth")
    try auth.set("v1 expired", for: Self.token)
    let roles = ["app", "widget", "keyboard"]
    let actors = try roles.map { try DemoActor(role: "token-client", container: container, arguments: [$0]) }
    for actor in actors { try actor.expect("ready") }
    try say("all", "app, widget and keyboard read the token \"v1 expired\" and ask for a refresh at once")
    for actor in actors { actor.send("go") }

    // Each answers "<monotonic ns> <what it did>"; tell them in the order they happened.
    let results = try actors.map { actor -> (UInt64, String) in
      let line = try actor.readLine()
      let parts = line.split(separator: " ", maxSplits: 1)
      return (UInt64(parts[0]) ?? 0, String(parts.count > 1 ? parts[1] : ""))
    }
    for ((_, what), role) in zip(results, roles).sorted(by: { $0.0.0 < $1.0.0 }) {
      try say(role, what)
    }
    let refreshes = results.filter { $0.1.hasPrefix("refreshed") }.count
    let token = try auth.get(Self.token) ?? ""
    try printLine("   \(refreshes) refresh for \(actors.count) processes; the token is now \"\(token)\".\n")
  }

  static let token = DefaultsKey<String>("token")

  /// Question 3: tell the other side that something changed.
  private func doorbellScene(_ container: SharedContainer) async throws {
    try printLine("3. The share extension saved a note; how does the app learn of it?  (Signal)")
    let app = try DemoActor(role: "doorbell-app", container: container)
    try app.expect("listening")
    try say("app", "listens for the \"notes-changed\" signal")
    let share = try DemoActor(role: "doorbell-share", container: container)
    try say("share", try share.readLine())
    try say("app", try app.readLine())
    try say("share", try share.readLine())
    try printLine("   No polling: the post itself wakes the app, which reads the state that came with it.\n")
  }

  /// Question 4: one database, and the other side's writes seen as they happen.
  private func databaseScene(_ container: SharedContainer) throws {
    try printLine(
      "4. The extension adds an entry to the shared database; does the app's list update?  (SharedDatabase)")
    let app = try DemoActor(role: "journal-app", container: container)
    try say("app", try app.readLine())
    try say("app", try app.readLine())
    let share = try DemoActor(role: "journal-share", container: container)
    try say("share", try share.readLine())
    try say("app", try app.readLine())
    try printLine("   The extension's commit rang a signal; the app's GRDB observation fetched again by itself.\n")
  }

  /// Question 5: a message to the other side, which is not running.
  private func inboxScene(_ container: SharedContainer) throws {
    try printLine("5. The share extension saves links while the app is not running; does the app get them?  (Mailbox)")
    let share = try DemoActor(role: "inbox-share", container: container)
    for _ in 0..<3 { try say("share", try share.readLine()) }
    try share.expect("done")
    let inbox = try container.mailbox("inbox")
    try say("app", "is not running; its inbox holds \(try inbox.count()) messages")
    let app = try DemoActor(role: "inbox-app", container: container, arguments: ["crash-before-last"])
    while true {
      let line = try app.readLine()
      if line == "crash-me" { break }
      try say("app", line)
    }
    app.crash()
    try say("app", "crashes (SIGKILL) before acknowledging it; the inbox still holds \(try inbox.count()) message")
    let restarted = try DemoActor(role: "inbox-app", container: container, arguments: ["drain"])
    while true {
      let line = try restarted.readLine()
      if line == "done" { break }
      try say("app", line)
    }
    try printLine("   Messages wait on disk until acknowledged: a crash can repeat one, never lose one.\n")
  }

  #if canImport(SwiftUIModel)
    /// Question 6: up to the view, a view property that another process's writes update. On
    /// Linux, which has no SwiftUI, the view runs in a model of SwiftUI's update cycle.
    @MainActor private func viewScene(_ container: SharedContainer) async throws {
      try printLine("6. The widget shows the app's theme; does its view follow the app's changes?  (@SharedValue)")
      let host = ViewHost(ThemeView().liaisonContainer(container))
      var shown = host.shown
      try say("widget", "its first frame shows the theme \"\(shown)\"")
      let app = try DemoActor(role: "theme-writer", container: container)
      for _ in 0..<3 {
        app.send("next")
        try say("app", try app.readLine())
        while host.shown == shown {
          let evaluated = host.evaluations
          try await Self.wait(for: Task { await host.waitForEvaluation(after: evaluated) }, "the widget's view")
        }
        shown = host.shown
        try say("widget", "redraws by itself: the theme is \"\(shown)\"")
      }
      try printLine("   One line in the view: @SharedValue(\"theme\", in: \"settings\") var theme = \"system\".")
      try printLine("   The write rang the domain's signal; the view read the new value and drew again.")
      try printLine("   (Linux has no SwiftUI: the view ran in Liaison's model of SwiftUI's update cycle.)\n")
    }

    /// The widget's view.
    struct ThemeView: View {
      @SharedValue("theme", in: "settings") var theme = "system"

      var body: Text { Text(theme) }
    }
  #else
    /// Question 6: up to the view, a model that another process's writes update.
    private func viewScene(_ container: SharedContainer) async throws {
      try printLine("6. The widget shows the app's theme; does its view follow the app's changes?  (ObservedValue)")
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else {
        try printLine("   (Skipped: the models need Observation, macOS 14 or later.)\n")
        return
      }
      let theme = try await ObservedValue(Self.theme, in: try await container.defaults("settings"))
      try say("widget", "its view shows the theme \"\(await theme.value ?? "system")\"")
      let app = try DemoActor(role: "theme-writer", container: container)
      for _ in 0..<3 {
        let changed = await Self.change { _ = theme.value }
        app.send("next")
        try say("app", try app.readLine())
        try await Self.wait(for: changed, "the widget's model to show the app's write")
        try say("widget", "redraws by itself: the theme is \"\(await theme.value ?? "system")\"")
      }
      try printLine("   No refresh button: the write rang the domain's signal, and the model read the new value.\n")
    }

  #endif

  static let theme = DefaultsKey<String>("theme")

  /// A task that ends at the next change of what `read` reads (`withObservationTracking`).
  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  @MainActor private static func change(_ read: @escaping @MainActor () -> Void) -> Task<Void, Never> {
    let (changed, continuation) = AsyncStream.makeStream(of: Void.self)
    withObservationTracking(read) { continuation.finish() }
    return Task { for await _ in changed {} }
  }

  /// Waits at most 10 s for `change`.
  private static func wait(for change: Task<Void, Never>, _ what: String) async throws {
    let came = await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        await change.value
        return true
      }
      group.addTask {
        try? await Task.sleep(for: .seconds(10))
        return false
      }
      defer { group.cancelAll() }
      return await group.next()!
    }
    if !came { throw CLIError("The demo waited 10 s for \(what), in vain.", status: ExitStatus.failure) }
  }

  static let journalMigrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(sql: "CREATE TABLE entry (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    }
    return migrator
  }()

  private func describe(_ presence: Presence) throws -> String {
    guard let holder = try presence.holder else { return "no" }
    return "yes, held by pid \(holder.processID)" + (holder.info.map { " (\($0))" } ?? "")
  }

  private func say(_ who: String, _ what: String) throws {
    try printLine("   " + "[\(who)]".padding(toLength: 11, withPad: " ", startingAt: 0) + what)
  }

  private func makeTemporaryDirectory() throws -> String {
    var template = Array(
      URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("liaison-demo-XXXXXX").path.utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
      throw CLIError(LiaisonError(.system, "Could not create a temporary folder for the demo."))
    }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// One actor of the demo: this program started again as `liaison _demo-actor ROLE …`.
final class DemoActor {
  private let child: ChildProcess

  init(role: String, container: SharedContainer, arguments: [String] = []) throws {
    do {
      child = try ChildProcess(
        Bundle.main.executablePath ?? CommandLine.arguments[0],
        ["_demo-actor", role, "--container", container.directory] + arguments)
    } catch {
      throw CLIError(LiaisonError(.system, "Could not start a demo process: \(error)"))
    }
  }

  deinit {
    child.closeInput()
    child.wait()
  }

  var pid: Int32 { child.pid }

  func send(_ line: String) { child.write(line) }

  func readLine() throws -> String {
    do {
      return try child.readLine(timeout: 120)
    } catch {
      throw CLIError(LiaisonError(.system, "A demo process (pid \(pid)) ended unexpectedly: \(error)."))
    }
  }

  func expect(_ line: String) throws {
    let got = try readLine()
    guard got == line else {
      throw CLIError(LiaisonError(.system, "A demo process (pid \(pid)) said '\(got)' instead of '\(line)'."))
    }
  }

  func crash() {
    child.kill(SIGKILL)
    child.wait()
  }
}

/// The demo's actors. Not for direct use.
struct DemoActorCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(commandName: "_demo-actor", shouldDisplay: false)

  @Argument var role: String
  @OptionGroup var options: ContainerOptions
  @Argument var arguments: [String] = []

  func run() async throws {
    let container = try options.open()
    switch role {
    case "recorder":
      let claim = try container.presence("recording").claim(info: "episode 7")
      try printLine("claimed")
      while Swift.readLine() != nil {}
      claim.release()
    case "token-client":
      let who = arguments[0]
      let auth = try await container.defaults("auth")
      try printLine("ready")
      _ = Swift.readLine()
      let refreshedHere = Locked(false)
      let token = try await auth.refresh(
        DemoCommand.token, timeout: .seconds(30), isFresh: { !$0.hasSuffix("expired") },
        using: {
          try await Task.sleep(for: .milliseconds(150))  // the network round trip of a real refresh
          refreshedHere.withLock { $0 = true }
          return "v2 fresh (refreshed by the \(who))"
        })
      let doneAt = DispatchTime.now().uptimeNanoseconds
      if refreshedHere.withLock({ $0 }) {
        try printLine("\(doneAt) refreshed the token: \"v1 expired\" → \"v2 fresh\"")
      } else {
        try printLine("\(doneAt) waited, then found \"\(token)\": nothing to do")
      }
    case "journal-app":
      let journal = try await container.database("journal", migrator: DemoCommand.journalMigrator)
      try printLine("opens the shared database \"journal\" and observes its entries")
      let titles = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT text FROM entry ORDER BY id")
      }
      .removeDuplicates()
      for try await entries in titles.values(in: journal.pool) {
        try printLine(entries.isEmpty ? "shows an empty list" : "shows \(entries.count) entry: \"\(entries.last!)\"")
        if !entries.isEmpty { break }
      }
    case "journal-share":
      let journal = try await container.database("journal", migrator: DemoCommand.journalMigrator)
      try await journal.pool.write { db in
        try db.execute(sql: "INSERT INTO entry (text) VALUES (?)", arguments: ["A link saved from Safari"])
      }
      try printLine("saves \"A link saved from Safari\" into the same database")
    case "inbox-share":
      let inbox = try await container.mailbox("inbox", sender: "share extension")
      for (number, link) in ["swift.org", "sqlite.org/wal.html", "man7.org/flock.2"].enumerated() {
        try await inbox.send(link, id: "link-\(number + 1)")
        try printLine("sends \"\(link)\" to the app's inbox")
      }
      try printLine("done")
    case "inbox-app":
      let receiver = try await container.mailbox("inbox").receiver()
      let crashBeforeLast = arguments.first == "crash-before-last"
      try printLine(crashBeforeLast ? "starts, and receives its inbox" : "starts again")
      while true {
        let batch = try receiver.receiveAvailable(String.self)
        if batch.isEmpty { break }
        for envelope in batch {
          try printLine("receives \"\(envelope.payload)\" from the \(envelope.sender)")
          if crashBeforeLast, try receiver.mailbox.count() == 1 {
            try printLine("crash-me")
            while Swift.readLine() != nil {}
          }
          try await receiver.acknowledge(envelope)
        }
      }
      try printLine("has an empty inbox (\(try receiver.mailbox.count()) messages)")
      try printLine("done")
    case "doorbell-app":
      let changes = try container.signal("notes-changed").notifications()
      try printLine("listening")
      for await note in changes {
        try container.signal("notes-answered").post(state: note.state + 1)
        try printLine("wakes up, reads note \(note.state) and answers with state \(note.state + 1)")
        break
      }
    case "doorbell-share":
      var answers = try container.signal("notes-answered").notifications().makeAsyncIterator()
      let signal = try container.signal("notes-changed")
      try printLine("saves note 41 and posts \"notes-changed\" with state 41")
      let postedAt = DispatchTime.now().uptimeNanoseconds
      try signal.post(state: 41)
      guard let answer = await answers.next() else { return }
      let elapsed = Double(DispatchTime.now().uptimeNanoseconds - postedAt) / 1000
      try printLine(String(format: "hears the answer, state \(answer.state), %.0f µs after posting", elapsed))
    case "theme-writer":
      let settings = try await container.defaults("settings")
      for theme in ["dark", "sepia", "light"] {
        guard Swift.readLine() != nil else { return }
        try await settings.set(theme, for: DemoCommand.theme)
        try printLine("sets the theme to \"\(theme)\"")
      }
    default:
      throw ValidationError("unknown demo role \(role)")
    }
  }
}

#if canImport(SwiftUIModel)
  extension ViewHost {
    /// What the hosted view's last `body` shows.
    fileprivate var shown: String { (body as? Text)?.content ?? "" }
  }
#endif
