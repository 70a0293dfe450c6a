import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A keyboard extension without Full Access reads its App Group container and may not write it:
/// here the container is seen through a real read-only bind mount, by another process.
@Suite("A read-only container")
struct ReadOnlyContainerTests {
  @Test(.enabled(if: ReadOnlyMount.mustRun, "needs root: a read-only bind mount"))
  func aReaderSeesWhatTheAppWroteAndWaitsForItsSignals() throws {
    let directory = TemporaryDirectory()
    let app = try SharedContainer(directory: directory.path)
    let claim = try app.presence("recording").claim(info: "episode-7")
    defer { claim.release() }
    try app.defaults("settings").set(42, for: DefaultsKey<Int>("volume"))
    try app.mailbox("inbox").send("hello", id: "m-1")
    let ready = try app.signal("ready")
    try ready.post(state: 1)

    let view = try ReadOnlyMount(of: directory.path)
    defer { view.unmount() }
    let keyboard = try Peer(container: view.path)
    defer { keyboard.kill() }

    // Probes and reads.
    #expect(try keyboard.send(.active, "recording") == "true")
    #expect(try keyboard.send(.placeHolder, "recording") == "\(getpid()) episode-7")
    #expect(try keyboard.send(.dget, "settings", "volume") == "42")
    #expect(try keyboard.send(.dget, "settings", "missing") == "nil")
    #expect(try keyboard.send(.mpeek, "inbox") == "1 m-1")
    #expect(try keyboard.send(.mcount, "inbox") == "1")

    // A signal the app posts wakes the reader.
    try keyboard.send(.observe, "ready")
    try ready.post(state: 7)
    #expect(try keyboard.send(.next, 10_000).hasPrefix("ready 7 "))

    // A presence's changes are watched: the app's release is seen.
    try keyboard.send(.watchPresence, "recording")
    #expect(try keyboard.send(.nextChange, 10_000).hasPrefix("claimed \(getpid()) "))
    claim.release()
    #expect(try keyboard.send(.nextChange, 10_000).hasPrefix("released "))
    #expect(try keyboard.send(.active, "recording") == "false")

    // Every write fails, saying why.
    let refusals = [
      try keyboard.ask(.claim, "recording"),
      try keyboard.ask(.lease, "recording", 1_000),
      try keyboard.ask(.trylock, "refresh"),
      try keyboard.ask(.post, "ready", 3),
      try keyboard.ask(.dset, "settings", "volume", 1),
      try keyboard.ask(.msend, "inbox", "keyboard", 1),
      try keyboard.ask(.mreceiver, "inbox"),
    ]
    for refusal in refusals {
      #expect(refusal.hasPrefix("error read-only: "), "\(refusal)")
      #expect(refusal.contains("the container is on a read-only file system"), "\(refusal)")
    }
    // Nothing was written.
    #expect(try app.defaults("settings").get(DefaultsKey<Int>("volume")) == 42)
    #expect(try app.mailbox("inbox").count() == 1)
    #expect(try ready.state == 7)
  }

  /// The app is suspended: `suspend()` closed its store's connections, the last ones on it. A
  /// read-write connection closing last would checkpoint and remove the `-wal` and `-shm` files,
  /// without which a process that may not write the folder cannot read a database in WAL mode; a
  /// pool closes its readers last, which are read-only and remove nothing. So the files stay, and
  /// the keyboard still reads what the app wrote.
  @Test(.enabled(if: ReadOnlyMount.mustRun, "needs root: a read-only bind mount"))
  func aReaderReadsWhatASuspendedAppWrote() throws {
    let directory = TemporaryDirectory()
    let app = try SharedContainer(directory: directory.path)
    try app.defaults("settings").set(42, for: DefaultsKey<Int>("volume"))
    try app.mailbox("inbox").send("hello", id: "m-1")
    app.suspend()
    defer { try? app.resume() }
    let store = directory.path + "/.liaison/store/defaults.sqlite"
    #expect(FileManager.default.fileExists(atPath: store + "-wal"))
    #expect(FileManager.default.fileExists(atPath: store + "-shm"))

    let view = try ReadOnlyMount(of: directory.path)
    defer { view.unmount() }
    let keyboard = try Peer(container: view.path)
    defer { keyboard.kill() }
    #expect(try keyboard.send(.dget, "settings", "volume") == "42")
    #expect(try keyboard.send(.mpeek, "inbox") == "1 m-1")
  }

  /// What no writer made yet reads as nothing there: no container folder of Liaison's at all, or
  /// a presence never claimed, a domain never opened.
  @Test(.enabled(if: ReadOnlyMount.mustRun, "needs root: a read-only bind mount"))
  func whatNoWriterMadeReadsAsNothingThere() throws {
    let empty = TemporaryDirectory()
    let emptyView = try ReadOnlyMount(of: empty.path)
    defer { emptyView.unmount() }
    let nothing = try SharedContainer(directory: emptyView.path)
    #expect(try nothing.presence("recording").isActive == false)
    #expect(try nothing.presence("recording").holder == nil)
    #expect(try nothing.presences().isEmpty)
    #expect(try nothing.signals().isEmpty)
    #expect(try nothing.locks().isEmpty)
    #expect(throws: LiaisonError.self) { try nothing.presence("recording").claim() }
    let refusal = try #require(throws: LiaisonError.self) { try nothing.signal("ready") }
    #expect(refusal.code == .readOnly)
    #expect(FileManager.default.fileExists(atPath: empty.path + "/.liaison") == false)

    // A container the app wrote, with a store, read by another process.
    let directory = TemporaryDirectory()
    let app = try SharedContainer(directory: directory.path)
    try app.defaults("settings").set(42, for: DefaultsKey<Int>("volume"))
    let view = try ReadOnlyMount(of: directory.path)
    defer { view.unmount() }
    let keyboard = try Peer(container: view.path)
    defer { keyboard.kill() }
    #expect(try keyboard.send(.active, "never-claimed") == "false")
    #expect(try keyboard.send(.placeHolder, "never-claimed") == "none")
    #expect(try keyboard.send(.dget, "never-opened", "volume") == "nil")
    #expect(try keyboard.ask(.watchPresence, "never-claimed").hasPrefix("error read-only: "))
  }
}
