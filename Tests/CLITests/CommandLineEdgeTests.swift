import Foundation
import GRDB
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a new user of `liaison` meets at the edges: values written by other programs, damaged
/// files, reading commands that must create nothing, the container option anywhere, standard
/// input.
@Suite("The liaison command at its edges")
struct CommandLineEdgeTests {
  let directory = TemporaryDirectory()

  func liaison(_ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String, errors: String) {
    let child = try ChildProcess(
      liaisonPath, arguments, environment: ["LIAISON_CONTAINER": directory.path],
      input: input == nil ? .discard : .pipe, errors: .pipe)
    if let input { writeAll(child.inputDescriptor!, Array(input.utf8)) }
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  /// Every file and folder under the container, with its size.
  func files(in path: String) -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: path)
    var found: [String] = []
    while let name = enumerator?.nextObject() as? String {
      let size = (try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? -1
      found.append(name.hasSuffix("-shm") || name.hasSuffix("-wal") ? name : "\(name) \(size)")
    }
    return found.sorted()
  }

  /// Parses every line of `text` as JSON, failing the test for any that is not.
  func expectJSONLines(_ text: String, _ command: String, sourceLocation: SourceLocation = #_sourceLocation) {
    for line in text.split(separator: "\n") {
      #expect(
        (try? JSONSerialization.jsonObject(with: Data(line.utf8), options: [.fragmentsAllowed])) != nil,
        "\(command) printed a line that is not JSON: \(line)", sourceLocation: sourceLocation)
    }
  }

  @Test func readingCommandsCreateNothing() throws {
    let reading: [[String]] = [
      ["status"], ["status", "--json"], ["state", "typo"], ["state", "s"], ["peek", "inbox"], ["peek", "other"],
      ["defaults", "read"], ["defaults", "read", "d"], ["defaults", "read", "d2"], ["defaults", "read", "d2", "k"],
      ["defaults", "read", "d", "k"], ["presence", "check", "p"], ["presence", "list"],
    ]
    // No container yet: each fails, saying so, and leaves no folder behind.
    for command in reading {
      let result = try liaison(command)
      #expect(result.status == 70, "\(command)")
      #expect(result.errors.contains("There is no container at"), "\(command): \(result.errors)")
    }
    #expect(files(in: directory.path).isEmpty)

    #expect(try liaison(["post", "s"]).status == 0)
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    #expect(try liaison(["defaults", "write", "d", "k", "1"]).status == 0)
    let before = files(in: directory.path)
    for command in reading { _ = try liaison(command) }
    #expect(files(in: directory.path) == before)
    #expect(try liaison(["state", "typo"]).status == 1)
  }

  @Test func writingCommandsCreateOnlyTheContainersOwnFolder() throws {
    let missingParent = directory.path + "/typo/container"
    let refused = try liaison(["post", "s", "--container", missingParent])
    #expect(refused.status == 64)
    #expect(refused.errors.contains("There is no folder '\(directory.path)/typo'"), "\(refused.errors)")
    #expect(!FileManager.default.fileExists(atPath: directory.path + "/typo"))
    #expect(try liaison(["post", "s", "--container", directory.path + "/made"]).status == 0)
    #expect(FileManager.default.fileExists(atPath: directory.path + "/made/.liaison"))
  }

  @Test func theContainerOptionGoesBeforeOrAfterTheSubcommand() throws {
    let other = directory.path + "/other"
    #expect(try liaison(["--container", other, "post", "s", "--state", "4"]).status == 0)
    #expect(try liaison(["--container=\(other)", "state", "s"]).output == "4\n")
    #expect(try liaison(["presence", "--container", other, "list"]).output == "no presences\n")
    #expect(try liaison(["--container", other, "lock", "x", "--", "sh", "-c", "echo ran"]).output == "ran\n")
    // After `--`, `--container` belongs to the command.
    #expect(try liaison(["lock", "x", "--", "echo", "--container", "y"]).output == "--container y\n")
  }

  @Test func jsonOutputStaysJSONWhateverAnotherProgramStored() throws {
    #expect(try liaison(["defaults", "write", "settings", "theme", "dark"]).status == 0)
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    // Another program writes the store: text that is not JSON, bytes that are not text, a kind
    // Liaison never writes, and a message that is not JSON.
    let store = try DatabaseQueue(path: directory.path + "/.liaison/store/defaults.sqlite")
    try store.write { db in
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('settings', 'words', 0, CAST('not json at all' AS BLOB))")
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('settings', 'bytes', 0, x'7b00ff')")
      try db.execute(sql: "INSERT INTO defaults_entry VALUES ('settings', 'odd', 9, x'00')")
    }
    for command in [
      ["defaults", "read", "--json"], ["defaults", "read", "settings", "--json"],
      ["defaults", "read", "settings", "theme", "--json"], ["defaults", "read", "settings", "words", "--json"],
      ["defaults", "read", "settings", "bytes", "--json"], ["defaults", "read", "settings", "odd", "--json"],
      ["status", "--json"], ["peek", "inbox", "--json"], ["presence", "list", "--json"],
      ["presence", "check", "p", "--json"], ["receive", "inbox", "--json"],
    ] {
      expectJSONLines(try liaison(command).output, "\(command)")
    }
    let all = try liaison(["defaults", "read", "settings", "--json"])
    #expect(all.status == 70)
    #expect(all.output == "{\"settings\":{\"theme\":\"dark\"}}\n")
    for key in ["words", "bytes", "odd"] {
      #expect(all.errors.contains("The value of '\(key)' in the defaults domain 'settings' cannot be read"))
      let one = try liaison(["defaults", "read", "settings", key, "--json"])
      #expect(one.status == 70 && one.output.isEmpty)
      #expect(one.errors.contains("The value of '\(key)' in the defaults domain 'settings' cannot be read"))
    }
  }

  @Test func statusShowsWhatItCanReadAndNamesTheDamagedFile() throws {
    #expect(try liaison(["post", "good", "--state", "1"]).status == 0)
    #expect(try liaison(["post", "bad", "--state", "2"]).status == 0)
    #expect(try liaison(["defaults", "write", "settings", "theme", "dark"]).status == 0)
    try overwrite(directory.path + "/.liaison/signals/bad", with: Array("LSG1 damaged".utf8))
    let text = try liaison(["status"])
    #expect(text.status == 70)
    #expect(text.output.contains("  good\tstate 1"))
    #expect(text.output.contains("  settings\t1 key"))
    #expect(text.output.contains("Problems:\n  signals bad: The signal file '"), "\(text.output)")
    let json = try liaison(["status", "--json"])
    #expect(json.status == 70)
    let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
    #expect((object?["signals"] as? [[String: Any]])?.map { $0["name"] as? String } == ["good"])
    let problems = object?["problems"] as? [[String: Any]]
    #expect(problems?.first?["name"] as? String == "bad" && problems?.first?["part"] as? String == "signals")
  }

  @Test func aDashReadsTheValueFromStandardInput() throws {
    let large = String(repeating: "x", count: 300_000)  // more than an argument may hold here
    #expect(try liaison(["defaults", "write", "app", "blob", "-"], input: large + "\n").status == 0)
    #expect(try liaison(["defaults", "read", "app", "blob"]).output == "\"\(large)\"\n")
    #expect(try liaison(["send", "inbox", "-", "--id", "m1"], input: "{\"n\": 1}").output == "m1\n")
    #expect(try liaison(["receive", "inbox"]).output == "{\"n\": 1}\n")
    let tooLarge = try liaison(["send", "inbox", "-"], input: String(repeating: "y", count: 2 << 20))
    #expect(tooLarge.status == 64, "\(tooLarge.errors)")
  }

  @Test func messagesSpeakTheCommandsLanguage() throws {
    let negative = try liaison(["lock", "x", "--timeout", "-1", "--", "true"])
    #expect(negative.status == 64)
    #expect(negative.errors.contains("a timeout is a number of seconds from 0 to 1e9"), "\(negative.errors)")
    let help = try liaison(["send", "--help"]).output
    let senderHelp = help.components(separatedBy: "--sender <sender>").last?
      .components(separatedBy: "--timeout <seconds>").first
    #expect(senderHelp?.components(separatedBy: "default").count == 2, "\(help)")
    #expect(try liaison(["receive", "--help"]).output.contains("--count"))

    let holder = try Peer(container: directory.path)
    try holder.send(.claim, "recording")
    let busy = try liaison(["presence", "claim", "recording", "--", "true"])
    #expect(busy.status == 75)
    #expect(busy.errors.contains("liaison presence check recording"), "\(busy.errors)")
    #expect(!busy.errors.contains("isActive"))
    try holder.send(.mreceiver, "inbox")
    let taken = try liaison(["receive", "inbox"])
    #expect(taken.status == 75)
    #expect(!taken.errors.contains("MailboxReceiver"), "\(taken.errors)")
  }

  @Test func aClaimInProgressIsActiveAndBusyNotAFailure() throws {
    // A claimant that has its lock but has not written its record yet: this process holds the
    // presence file's lock with no record in it.
    #expect(try liaison(["presence", "claim", "recorder", "--", "true"]).status == 0)  // the file exists
    let fd = open(directory.path + "/.liaison/presence/recorder", O_RDWR | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    try #require(holdLikeAClaimBeingMade(fd))
    // The record that `true` left (it ended without releasing) would name an exited holder.
    try #require(ftruncate(fd, 0) == 0)
    let check = try liaison(["presence", "check", "recorder"])
    #expect(check.status == 0 && check.output == "active: claim in progress (its holder is not recorded yet)\n")
    let json = try liaison(["presence", "check", "recorder", "--json"])
    expectJSONLines(json.output, "presence check --json")
    #expect(json.output.contains("\"active\":true"))
    #expect(try liaison(["presence", "claim", "recorder", "--", "true"]).status == 75)
    #expect(try liaison(["status"]).status == 0)
  }
}
