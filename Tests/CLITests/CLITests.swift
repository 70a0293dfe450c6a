import Foundation
import LiaisonTestSupport
import Testing

@Suite("The liaison command")
struct CLITests {
  let directory = TemporaryDirectory()

  /// Runs `liaison ARGS` on the test's container (through the environment) and returns the exit
  /// status a shell would report, its standard output and its standard error.
  func liaison(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    let child = try ChildProcess(
      liaisonPath, arguments, environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  /// A store whose write-ahead log was removed after acknowledged writes (the writer was killed,
  /// so they were still only in the log): `defaults read` and `peek` refuse it, exit 70 and name
  /// the log; neither reads it as empty. (Before, both printed nothing and exited 0.)
  @Test func aStoreWhoseLogWasRemovedIsRefusedNotReadAsEmpty() throws {
    let writer = try Peer(container: directory.path)
    try writer.send(.dset, "settings", "theme", "7")
    try writer.send(.msendid, "inbox", "a", "hello")
    writer.kill()
    for store in ["defaults", "mailboxes"] {
      try FileManager.default.removeItem(atPath: directory.path + "/.liaison/store/\(store).sqlite-wal")
    }
    let reads = [(["defaults", "read", "settings", "theme"], "defaults"), (["peek", "inbox"], "mailboxes")]
    for (arguments, store) in reads {
      let refused = try liaison(arguments)
      #expect(refused.status == 70, "\(arguments): \(refused)")
      #expect(refused.output.isEmpty, "\(arguments)")
      #expect(refused.errors.contains(directory.path + "/.liaison/store/\(store).sqlite-wal"), "\(refused.errors)")
      #expect(refused.errors.contains("lost commits it acknowledged"), "\(refused.errors)")
    }
  }

  @Test func lockRunsTheCommandAndPassesItsExitStatus() throws {
    #expect(try liaison(["lock", "job", "--", "sh", "-c", "exit 0"]).status == 0)
    #expect(try liaison(["lock", "job", "--", "sh", "-c", "exit 3"]).status == 3)
    #expect(try liaison(["lock", "job", "--", "sh", "-c", "echo ran"]).output == "ran\n")
    let missing = try liaison(["lock", "job", "--", "no-such-command-anywhere"])
    #expect(missing.status == 127)
    #expect(missing.errors.hasPrefix("liaison: cannot run 'no-such-command-anywhere': no such command"))
    let notExecutable = try liaison(["lock", "job", "--", directory.path])
    #expect(notExecutable.status == 126)
    #expect(notExecutable.errors.hasPrefix("liaison: cannot run '\(directory.path)': "))
    #expect(try liaison(["lock", "job", "--", "sh", "-c", "kill -9 $$"]).status == 128 + 9)
  }

  /// An exclusive lock's command finds its fencing token in the environment, one larger each
  /// time; a shared one finds none, even if the caller had one set.
  @Test func lockHandsTheCommandItsFencingToken() throws {
    let print = ["sh", "-c", "echo ${LIAISON_FENCING_TOKEN-none}"]
    #expect(try liaison(["lock", "job", "--"] + print).output == "1\n")
    #expect(try liaison(["lock", "job", "--"] + print).output == "2\n")
    let child = try ChildProcess(
      liaisonPath, ["lock", "job", "--shared", "--"] + print,
      environment: ["LIAISON_CONTAINER": directory.path, "LIAISON_FENCING_TOKEN": "7"], errors: .pipe)
    #expect(child.finish().output == "none\n")
  }

  /// A lock file shared with util-linux's `flock(1)`, which writes `pid=…` into it: `liaison lock`
  /// still runs its command with a token larger each time, and the two tools exclude each other.
  @Test(.enabled(if: isLinux, "runs util-linux's flock")) func lockSharesItsFileWithFlockTool() throws {
    let token = ["sh", "-c", "echo $LIAISON_FENCING_TOKEN"]
    #expect(try liaison(["lock", "job", "--"] + token).output == "1\n")
    let file = directory.path + "/.liaison/locks/job"
    let wrote = try ChildProcess("flock", [file, "sh", "-c", "echo pid=$$ > '\(file)'"]).finish()
    #expect(wrote.termination == .exited(0))
    #expect(try String(contentsOfFile: file, encoding: .utf8).hasPrefix("pid="))
    #expect(try liaison(["lock", "job", "--"] + token).output == "2\n")
    #expect(try liaison(["lock", "job", "--"] + token).output == "3\n")
    // flock(1) holds it: liaison waits (and gives up).
    let flockHolder = try ChildProcess("flock", [file, "sh", "-c", "echo held; read line || true"])
    #expect(try flockHolder.readLine() == "held")
    #expect(try liaison(["lock", "job", "--timeout", "0", "--", "true"]).status == 75)
    flockHolder.closeInput()
    #expect(flockHolder.wait() == .exited(0))
    // liaison holds it: flock(1) does not get it.
    let liaisonHolder = try ChildProcess(
      liaisonPath, ["lock", "job", "--", "sh", "-c", "echo held; read line || true"],
      environment: ["LIAISON_CONTAINER": directory.path])
    #expect(try liaisonHolder.readLine() == "held")
    #expect(try ChildProcess("flock", ["-n", file, "true"]).finish().termination == .exited(1))
    liaisonHolder.closeInput()
    #expect(liaisonHolder.wait() == .exited(0))
    #expect(try liaison(["lock", "job", "--"] + token).output == "5\n")
  }

  @Test func lockTimesOutWithStatus75WhileAnotherProcessHoldsIt() throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.lock, "job")
    let result = try liaison(["lock", "job", "--timeout", "0.1", "--", "sh", "-c", "echo should-not-run"])
    #expect(result.status == 75)
    #expect(result.output.isEmpty)
    try holder.send(.unlock, "job")
    #expect(try liaison(["lock", "job", "--timeout", "5", "--", "true"]).status == 0)
  }

  @Test func presenceCheckExitsZeroWhenActiveAndOneWhenNot() throws {
    #expect(try liaison(["post", "start"]).status == 0)  // the container now exists
    let inactive = try liaison(["presence", "check", "recording"])
    #expect(inactive.status == 1 && inactive.output == "inactive\n")
    let app = try Peer(container: directory.path)
    try app.send(.claim, "recording", "episode", "7")
    let active = try liaison(["presence", "check", "recording"])
    #expect(active.status == 0)
    #expect(active.output.hasPrefix("active: pid \(app.pid) (claim)"))
    #expect(active.output.contains("episode 7"))
    let json = try liaison(["presence", "check", "recording", "--json"])
    let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
    #expect(object?["active"] as? Bool == true)
    #expect((object?["holder"] as? [String: Any])?["pid"] as? Int == Int(app.pid))
    #expect(try liaison(["presence", "claim", "recording", "--", "true"]).status == 75)
    app.kill()
    #expect(try liaison(["presence", "check", "recording"]).status == 1)
  }

  @Test func presenceClaimHoldsThePresenceWhileTheCommandRuns() throws {
    let result = try liaison([
      "presence", "claim", "sync", "--info", "nightly", "--", "sh", "-c", "echo $PPID",
    ])
    #expect(result.status == 0)
    // The claim was held by the command while it ran, and is gone now.
    #expect(try liaison(["presence", "check", "sync"]).status == 1)
    let listed = try liaison(["presence", "list", "--json"])
    #expect(listed.output.contains("\"name\":\"sync\""))
  }

  @Test func statusListsPresencesAndLocks() throws {
    let peer = try Peer(container: directory.path)
    try peer.send(.claim, "recording")
    try peer.send(.lock, "token-refresh")
    let status = try liaison(["status", "--json"])
    #expect(status.status == 0)
    let object = try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any]
    let locks = object?["locks"] as? [[String: Any]]
    #expect(locks?.first?["name"] as? String == "token-refresh")
    #expect(locks?.first?["state"] as? String == "held exclusive")
    let presences = object?["presences"] as? [[String: Any]]
    #expect(presences?.first?["active"] as? Bool == true)
  }

  @Test func badNamesAndMissingCommandsAreUsageErrors() throws {
    #expect(try liaison(["lock", "../x", "--", "true"]).status == 64)
    #expect(try liaison(["lock", "x"]).status == 64)
    #expect(try liaison(["presence", "check", ".hidden"]).status == 64)
    #expect(try liaison(["lock", "x", "--timeout", "1e19", "--", "true"]).status == 64)
    #expect(try liaison(["lock", "x", "--timeout", "-1", "--", "true"]).status == 64)
  }

  @Test func waitReturnsTheStateOfTheNextPostAndTimesOutWith75() throws {
    #expect(try liaison(["wait", "ring", "--timeout", "0.1"]).status == 75)
    let waiter = try ChildProcess(
      liaisonPath, ["wait", "ring", "--container", directory.path])
    // `wait` subscribes before it prints anything, so a post is certain to be seen only after it
    // started waiting: post until it answers (each post is a separate notification).
    let poster = try Peer(container: directory.path)
    var answer: String?
    while answer == nil {
      try poster.send(.post, "ring", "5")
      answer = try? waiter.readLine(timeout: 0.2)
    }
    #expect(answer == "5")
    #expect(waiter.wait() == .exited(0))
  }

  @Test func observePrintsALinePerNotification() throws {
    let observer = try ChildProcess(
      liaisonPath,
      ["observe", "a", "b", "--json", "--container", directory.path])
    defer { observer.kill(SIGKILL) }
    let poster = try Peer(container: directory.path)
    var line: String?
    while line == nil {
      try poster.send(.post, "a", "3")
      line = try? observer.readLine(timeout: 0.2)
    }
    #expect(line?.contains("\"name\":\"a\"") == true && line?.contains("\"state\":3") == true)
    try poster.send(.post, "b", "4")
    let next = try observer.readLine()
    #expect(next.contains("\"name\":\"b\"") && next.contains("\"state\":4"))
  }

  @Test func postStateAndStatusAgree() throws {
    #expect(try liaison(["post", "s", "--state", "12"]).status == 0)
    #expect(try liaison(["state", "s"]).output == "12\n")
    #expect(try liaison(["state", "s", "--set", "13"]).status == 0)
    #expect(try liaison(["state", "s"]).output == "13\n")
    let status = try liaison(["status", "--json"])
    #expect(status.output.contains("\"signals\":[{\"name\":\"s\",\"state\":13}]"))
    #expect(try liaison(["post", "bad/name"]).status == 64)
  }

  @Test func defaultsWriteReadDeleteAndStatus() throws {
    #expect(try liaison(["defaults", "write", "settings", "theme", "dark"]).status == 0)
    #expect(try liaison(["defaults", "write", "settings", "volume", "0.8"]).status == 0)
    #expect(try liaison(["defaults", "read", "settings", "theme"]).output == "\"dark\"\n")
    #expect(try liaison(["defaults", "read", "settings"]).output == "theme = \"dark\"\nvolume = 0.8\n")
    #expect(try liaison(["defaults", "read", "settings", "missing"]).status == 1)
    #expect(try liaison(["status", "--json"]).output.contains("\"defaults\":[{\"keys\":2,\"name\":\"settings\"}]"))
    #expect(try liaison(["defaults", "delete", "settings", "theme"]).status == 0)
    #expect(try liaison(["defaults", "read", "settings", "theme"]).status == 1)
    #expect(try liaison(["defaults", "delete", "settings"]).status == 0)
    #expect(try liaison(["defaults", "read", "settings"]).output.isEmpty)
    #expect(try liaison(["defaults", "write", "bad key", "x", "y"]).status == 64)
  }

  @Test func defaultsObservePrintsTheValueThenEachChange() throws {
    let observer = try ChildProcess(
      liaisonPath,
      ["defaults", "observe", "app", "mode", "--container", directory.path])
    defer { observer.kill(SIGKILL) }
    #expect(try observer.readLine() == "null")
    #expect(try liaison(["defaults", "write", "app", "mode", "dark"]).status == 0)
    #expect(try observer.readLine() == "\"dark\"")
    #expect(try liaison(["defaults", "delete", "app", "mode"]).status == 0)
    #expect(try observer.readLine() == "null")
  }

  @Test func statusShowsSharedDatabasesWithTheirSchema() throws {
    let peer = try Peer(container: directory.path)
    try peer.send(.dbopen, "notes", "2")
    try peer.send(.dbinsert, "notes", "3")
    let status = try liaison(["status", "--json"])
    #expect(status.status == 0)
    #expect(status.output.contains("\"migrations\":2,\"name\":\"notes\",\"schemaVersion\":\"v2\""), "\(status.output)")
  }

  @Test func sendPeekReceiveAndStatusBacklog() throws {
    #expect(try liaison(["send", "inbox", "hello", "--id", "m1"]).output == "m1\n")
    #expect(try liaison(["send", "inbox", "{\"n\": 2}", "--id", "m2"]).status == 0)
    #expect(try liaison(["send", "inbox", "again", "--id", "m1"]).status == 0)  // stored once
    #expect(try liaison(["peek", "inbox"]).output == "m1\tliaison\t\"hello\"\nm2\tliaison\t{\"n\": 2}\n")
    #expect(try liaison(["status", "--json"]).output.contains("\"mailboxes\":[{\"bytes\":15,\"name\":\"inbox\","))
    #expect(try liaison(["receive", "inbox", "--count", "1", "--no-ack"]).output == "\"hello\"\n")
    let first = try liaison(["receive", "inbox", "--count", "1", "--json"]).output
    #expect(first.hasPrefix("{\"id\":\"m1\",\"payload\":\"hello\",\"sender\":\"liaison\",\"sentAt\":\""), "\(first)")
    #expect(try liaison(["receive", "inbox"]).output == "{\"n\": 2}\n")
    #expect(try liaison(["receive", "inbox"]).output.isEmpty)
    #expect(try liaison(["status"]).output.contains("Mailboxes: none"))
    #expect(try liaison(["send", "bad/name", "x"]).status == 64)
  }

  @Test func requeuePutsQuarantinedMessagesBackInTheQueue() throws {
    #expect(try liaison(["send", "inbox", "hello", "--id", "m1"]).status == 0)
    #expect(try liaison(["send", "inbox", "world", "--id", "m2"]).status == 0)
    let old = try Peer(container: directory.path)  // reads only {sender, n}: quarantines both
    try old.send(.mreceive, "inbox", "\(directory.path)/log", "8")
    try waitUntil("both are quarantined") { try old.send(.mcount, "inbox") == "0" }
    old.kill()
    #expect(try liaison(["receive", "inbox"]).output.isEmpty)
    #expect(try liaison(["requeue", "inbox", "--id", "m2"]).output == "1\n")
    #expect(try liaison(["receive", "inbox"]).output == "\"world\"\n")
    #expect(try liaison(["requeue", "inbox"]).output == "1\n")
    #expect(try liaison(["receive", "inbox"]).output == "\"hello\"\n")
    #expect(try liaison(["requeue", "nothing-here"]).output == "0\n")
  }

  @Test func receiveFollowsAndASecondReceiverExits75() throws {
    let follower = try ChildProcess(
      liaisonPath,
      ["receive", "queue", "--follow", "--count", "2", "--container", directory.path])
    // No probing for the follower with `receive`: a probe that holds the mailbox at the moment
    // the follower starts makes the follower exit 75. Once it printed a message, it holds it.
    #expect(try liaison(["send", "queue", "one"]).status == 0)
    #expect(try follower.readLine() == "\"one\"")
    #expect(try liaison(["receive", "queue"]).status == 75)
    #expect(try liaison(["send", "queue", "two"]).status == 0)
    #expect(try follower.readLine() == "\"two\"")
    #expect(follower.wait() == .exited(0))
    #expect(try liaison(["receive", "queue"]).status == 0)
  }

  @Test func theDemoRunsToTheEndAndExitsZero() throws {
    let demo = try liaison(["demo"])
    #expect(demo.status == 0)
    #expect(demo.output.contains("1 refresh for 3 processes"))
    #expect(demo.output.contains("hears the answer, state 42"))
    #expect(demo.output.contains("shows 1 entry: \"A link saved from Safari\""))
    #expect(demo.output.contains("its inbox holds 3 messages"))
    #expect(demo.output.contains("has an empty inbox (0 messages)"))
    #expect(demo.output.contains("Done"))
  }
}

/// The `liaison` executable of this build.
let liaisonPath = productsDirectory().appendingPathComponent("liaison").path
