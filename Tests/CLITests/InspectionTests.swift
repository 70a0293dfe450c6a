import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `status`, `presence check` and `presence list` look without disturbing, at any scale, and say
/// what they know of a claim whose process left it to a descendant.
@Suite("Inspection with the liaison command")
struct InspectionTests {
  let directory = TemporaryDirectory()

  /// Runs `liaison ARGS` on the test's container; returns its shell status and output.
  func liaison(_ arguments: [String], through program: String = liaisonPath) throws -> (
    status: Int32, output: String, errors: String
  ) {
    let environment = ["LIAISON_CONTAINER": directory.path]
    let child = try ChildProcess(
      program, arguments,
      environment: program.hasSuffix("strace") ? environmentWithoutLeakCheck(environment) : environment,
      errors: .pipe)
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  /// Starts `liaison ARGS` on the test's container with at most 1,024 open descriptors, the
  /// default limit of a shell (`ulimit -n`).
  func liaisonUnderDefaultDescriptorLimit(_ arguments: [String]) throws -> ChildProcess {
    try ChildProcess(
      "/bin/sh", ["-c", "ulimit -n 1024 && exec \"$0\" \"$@\"", liaisonPath] + arguments,
      environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
  }

  /// With another process stopped in the middle of a write of each store (it holds the store's
  /// lock, and SQLite's write lock in a transaction it has begun), `status`, `peek` and `defaults
  /// read` answer at once with what was committed (before, each waited for ever: opening a store
  /// took its lock). A write still waits, and says so at its timeout.
  @Test func readingCommandsNeverWaitForAStuckWriter() throws {
    #expect(try liaison(["defaults", "write", "settings", "theme", "dark"]).status == 0)
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    let writer = try Peer(container: directory.path)
    var transactions: [ChildProcess] = []
    for store in ["defaults", "mailboxes"] {
      try writer.send(.holdlock, "store", "\(store).write")
      // Another process in the middle of a write: SQLite's write lock, held by a transaction.
      let transaction = try ChildProcess(
        "/usr/bin/env",
        [
          "python3", "-c",
          "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            + "c.execute('BEGIN IMMEDIATE'); print('begun', flush=True); sys.stdin.read()",
          directory.path + "/.liaison/store/\(store).sqlite",
        ])
      #expect(try transaction.readLine() == "begun")
      transactions.append(transaction)
    }
    let read = try liaisonWithin(60, ["defaults", "read", "settings", "theme"])
    #expect(read.status == 0 && read.output == "\"dark\"\n", "\(read)")
    let peeked = try liaisonWithin(60, ["peek", "inbox"])
    #expect(peeked.status == 0 && peeked.output.hasSuffix("\t\"hello\"\n"), "\(peeked)")
    let status = try liaisonWithin(60, ["status"])
    #expect(status.status == 0 && status.output.contains("inbox"), "\(status)")
    let written = try liaisonWithin(60, ["defaults", "write", "settings", "theme", "light", "--timeout", "0.2"])
    #expect(written.status == 75 && written.errors.contains("another process's write"), "\(written)")
    for transaction in transactions { _ = transaction.finish() }
  }

  /// `status` lists every part that cannot be used: a defaults domain and a mailbox whose signal
  /// files are damaged (the commands that use them fail), and the store whose database is not a
  /// database; it exits 70 then (before, it listed the domain and the mailbox as sound, exit 0).
  @Test func statusListsEveryPartItCannotUse() throws {
    #expect(try liaison(["defaults", "write", "settings", "theme", "dark"]).status == 0)
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    let garbage = Data(repeating: 0xA5, count: 32)
    for file in ["store-signals/settings", "mailbox-signals/inbox"] {
      try garbage.write(to: URL(fileURLWithPath: directory.path + "/.liaison/" + file))
    }
    #expect(try liaison(["peek", "inbox"]).status == 70)
    #expect(try liaison(["defaults", "read", "settings", "theme"]).status == 70)
    let status = try liaison(["status"])
    #expect(status.status == 70, "\(status)")
    for file in ["store-signals/settings", "mailbox-signals/inbox"] {
      #expect(status.output.contains(directory.path + "/.liaison/" + file), "\(status.output)")
    }
    let json = try liaison(["status", "--json"])
    #expect(json.status == 70)
    #expect(json.output.contains("\"name\":\"settings\",\"part\":\"defaults\""), "\(json.output)")
    #expect(json.output.contains("\"name\":\"inbox\",\"part\":\"mailboxes\""), "\(json.output)")
  }

  /// A post, a claim and a lock that failed on a full disk (the failure injected into their files'
  /// writes) leave no signal, presence or lock for `status` to list: what their files hold says
  /// that nothing was ever posted, claimed or given a token (before, each was listed).
  @Test func writesThatFailedOnAFullDiskLeaveNothingListed() throws {
    #expect(try liaison(["post", "other"]).status == 0)
    let attempts = [
      ("signals/sig", ["post", "sig"]), ("presence/rec", ["presence", "claim", "rec", "--", "true"]),
      ("locks/.fencing-tokens/job", ["lock", "job", "--", "true"]),
    ]
    for (file, command) in attempts {
      let failed = try liaison(
        [
          "-f", "-o", "/dev/null", "-P", directory.path + "/.liaison/" + file, "-e", "trace=pwrite64,write", "-e",
          "inject=pwrite64,write:error=ENOSPC", liaisonPath,
        ] + command, through: "/usr/bin/strace")
      #expect(failed.status == 70 && failed.errors.contains("The disk is full"), "\(command): \(failed)")
    }
    let status = try liaison(["status"])
    #expect(status.status == 0, "\(status)")
    #expect(status.output.contains("Presences: none\nLocks: none\nSignals:\n  other\tstate 0\n"), "\(status.output)")
  }

  /// `liaison ARGS`, killed if it has not ended within `seconds` (a bound for failure): exit
  /// status 124 then, as `timeout(1)` reports.
  func liaisonWithin(_ seconds: Int, _ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    try liaison(["--kill-after=1", "\(seconds)", liaisonPath] + arguments, through: "/usr/bin/timeout")
  }

  /// Looking takes no lock: while `status` and `presence list` run over and over, another
  /// process tries the lock without waiting thousands of times, and every try gets it.
  @Test(.enabled(if: readsProc, "the lock table is Linux's")) func lookingNeverMakesATryFail() throws {
    let peer = try Peer(container: directory.path)
    #expect(try peer.send(.trylockRepeatedly, "job", "1") == "0 busy")
    let claimant = try Peer(container: directory.path)
    try claimant.send(.claim, "recording")
    let looker = try ChildProcess(
      "/bin/sh",
      [
        "-c", "for i in $(seq 40); do \"$0\" status >/dev/null && \"$0\" presence list >/dev/null || exit 1; done",
        liaisonPath,
      ],
      environment: ["LIAISON_CONTAINER": directory.path])
    var busy = 0
    var tries = 0
    while !looker.hasExited {
      let answer = try peer.send(.trylockRepeatedly, "job", "2000")
      busy += try #require(Int(answer.split(separator: " ")[0]))
      tries += 2000
    }
    #expect(looker.wait() == .exited(0))
    #expect(busy == 0, "\(busy) of \(tries) tries found the lock taken by a look")
  }

  /// Ten thousand presences are listed under the default limit of 1,024 descriptors: one is
  /// opened, read and closed at a time.
  @Test func tenThousandPresencesAreListedUnderTheDefaultDescriptorLimit() throws {
    #expect(try liaison(["post", "start"]).status == 0)  // the container now exists
    let folder = directory.path + "/.liaison/presence/"
    for index in 0..<10_000 {
      // What a claim that ended leaves (here, a record that names no holder).
      #expect(FileManager.default.createFile(atPath: folder + String(format: "p%05d", index), contents: Data("-".utf8)))
    }
    let claimant = try Peer(container: directory.path)
    try claimant.send(.claim, "p09999")
    let list = try liaisonUnderDefaultDescriptorLimit(["presence", "list"]).finish()
    #expect(list.termination == .exited(0), "\(list.errors)")
    let lines = list.output.split(separator: "\n")
    #expect(lines.count == 10_000)
    #expect(lines.last?.hasPrefix("p09999\tactive: pid \(claimant.pid) (claim)") == true)
    let status = try liaisonUnderDefaultDescriptorLimit(["status", "--json"]).finish()
    #expect(status.termination == .exited(0), "\(status.errors)")
    let object = try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any]
    #expect((object?["presences"] as? [Any])?.count == 10_000)
    #expect((object?["problems"] as? [Any])?.isEmpty == true)
  }

  /// Ten thousand signals are observed under the default limit of 1,024 descriptors (Linux: the
  /// watches need no descriptor per signal), and a post to the last one is seen.
  @Test(.enabled(if: isLinux, "Apple platforms keep a descriptor per observed signal"))
  func tenThousandSignalsAreObservedUnderTheDefaultDescriptorLimit() throws {
    #expect(try liaison(["post", "start"]).status == 0)
    let folder = directory.path + "/.liaison/signals/"
    let names = (0..<10_000).map { String(format: "s%05d", $0) }
    for name in names { #expect(FileManager.default.createFile(atPath: folder + name, contents: nil)) }
    // The names on standard input: swift-argument-parser takes quadratic time over 10,000 arguments.
    let observer = try liaisonUnderDefaultDescriptorLimit(["observe", "-"])
    observer.write(names.joined(separator: "\n"))
    observer.closeInput()
    defer {
      observer.kill(SIGKILL)
      observer.wait()
    }
    // `observe` prints nothing until a notification: post until it answers (each post is one).
    var line: String?
    while line == nil && !observer.hasExited {
      #expect(try liaison(["post", "s09999", "--state", "7"]).status == 0)
      line = try? observer.readLine(timeout: 0.2)
    }
    #expect(line?.hasPrefix("s09999 7 ") == true, "observe ended: \(observer.finish().errors)")
  }

  /// A self-daemonising command under `presence claim` leaves the claim to its worker: `check`,
  /// `list` and `status` say the presence is held by a descendant of the recorded process, which
  /// has exited, until the worker ends.
  @Test(.enabled(if: readsProc, "the lock table is Linux's")) func aClaimLeftToADescendantIsReportedSo() throws {
    let claim = try ChildProcess(
      liaisonPath, ["presence", "claim", "syncd", "--", "sh", "-c", "sleep 1000 >/dev/null & echo $$ $!"],
      environment: ["LIAISON_CONTAINER": directory.path])
    let pids = try claim.readLine().split(separator: " ").compactMap { Int32($0) }
    #expect(claim.wait() == .exited(0))
    try #require(pids.count == 2)
    let (recorded, worker) = (pids[0], pids[1])
    defer { kill(worker, SIGKILL) }

    let check = try liaison(["presence", "check", "syncd"])
    #expect(check.status == 0)
    #expect(check.output.hasPrefix("active: pid \(recorded) (claim)"))
    #expect(check.output.contains("held by a descendant of pid \(recorded), which has exited"))
    let json = try liaison(["presence", "check", "syncd", "--json"])
    let holder = (try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])?["holder"]
    #expect((holder as? [String: Any])?["pid"] as? Int == Int(recorded))
    #expect((holder as? [String: Any])?["pidExited"] as? Bool == true)
    #expect(try liaison(["presence", "list"]).output.contains("held by a descendant of pid \(recorded)"))
    #expect(try liaison(["status"]).output.contains("held by a descendant of pid \(recorded)"))
    let status = try liaison(["status", "--json"])
    let presences = (try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])?["presences"]
    let reported = (presences as? [[String: Any]])?.first
    #expect(reported?["active"] as? Bool == true)
    #expect((reported?["holder"] as? [String: Any])?["pidExited"] as? Bool == true)

    kill(worker, SIGKILL)
    try waitUntil("the worker's end releases the claim") { try liaison(["presence", "check", "syncd"]).status == 1 }
  }
}
