import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What `liaison` does when its output cannot be written, when its input is not text, when data
/// holds control characters, and what its messages name as the cause: each across a real
/// `liaison` process whose standard streams the test sets up.
@Suite("The liaison command's output, input and messages")
struct OutputAndInputTests {
  let directory = TemporaryDirectory()

  /// Where a test sends one of `liaison`'s standard streams.
  enum Sink: CustomStringConvertible {
    /// `/dev/full`: every write fails with `ENOSPC`.
    case full
    /// Closed by the caller (`>&-`): every write fails with `EBADF`.
    case closed
    /// A pipe whose reader has gone, with SIGPIPE ignored (systemd's default for its services):
    /// every write fails with `EPIPE`.
    case brokenPipe

    /// Each sink this system has (Apple platforms have no `/dev/full`).
    static var allCases: [Sink] {
      #if os(Linux)
        [.full, .closed, .brokenPipe]
      #else
        [.closed, .brokenPipe]
      #endif
    }

    var description: String {
      switch self {
      case .full: "/dev/full"
      case .closed: "closed"
      case .brokenPipe: "a broken pipe"
      }
    }
  }

  /// Runs `liaison ARGS` on the test's container with SIGPIPE ignored, its standard output or
  /// error (not both) sent to `sink` and the other piped, and `input` (bytes) on its standard
  /// input; returns the status a shell reports and the piped stream's text.
  func liaison(
    _ arguments: [String], output: Sink? = nil, errors: Sink? = nil, input: [UInt8]? = nil
  ) throws -> (status: Int32, output: String, errors: String) {
    precondition(output == nil || errors == nil, "one stream at a time")
    let target = output != nil ? 1 : 2
    var descriptor: CInt = -1
    var closing = ""
    switch output ?? errors {
    case .full?:
      descriptor = open("/dev/full", O_WRONLY | O_CLOEXEC)
    case .closed?:
      closing = " \(target)>&-"
    case .brokenPipe?:
      var ends: [CInt] = [-1, -1]
      try #require(pipe(&ends) == 0)
      _ = close(ends[0])  // the reader is gone before liaison writes
      descriptor = ends[1]
    case nil:
      break
    }
    defer { if descriptor >= 0 { _ = close(descriptor) } }
    let sunk: ChildProcess.Stream = descriptor >= 0 ? .descriptor(descriptor) : .pipe
    // `trap '' PIPE` ignores SIGPIPE, and liaison keeps it ignored across the exec.
    let child = try ChildProcess(
      "/bin/sh", ["-c", "trap '' PIPE; exec \"$0\" \"$@\"" + closing, liaisonPath] + arguments,
      environment: ["LIAISON_CONTAINER": directory.path], input: input == nil ? .discard : .pipe,
      output: output == nil ? .pipe : sunk, errors: errors == nil ? .pipe : sunk)
    if let input { writeAll(child.inputDescriptor!, input) }
    let (printed, errorText, termination) = child.finish()
    return (termination.shellStatus, printed, errorText)
  }

  // MARK: - Output that cannot be written

  /// A busy `lock --timeout` says so on standard error and exits 75 whatever standard error is;
  /// writing the line used to trap (SIGILL, status 132).
  @Test(arguments: Sink.allCases)
  func aBusyLockExits75WhateverStandardErrorIs(_ sink: Sink) throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.lock, "job")
    let result = try liaison(["lock", "job", "--timeout", "0.1", "--", "true"], errors: sink)
    #expect(result.status == 75, "standard error \(sink)")
  }

  /// Every command that prints data exits 74 (EX_IOERR) when its output cannot be written, and
  /// says so on standard error.
  @Test(arguments: Sink.allCases)
  func outputThatCannotBeWrittenIsAFailure(_ sink: Sink) throws {
    #expect(try liaison(["defaults", "write", "d", "k", "1"]).status == 0)
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    #expect(try liaison(["post", "s", "--state", "3"]).status == 0)
    let commands: [[String]] = [
      ["send", "inbox", "again"], ["defaults", "read"], ["defaults", "read", "d"], ["defaults", "read", "d", "k"],
      ["defaults", "read", "--json"], ["peek", "inbox"], ["peek", "inbox", "--json"], ["status"],
      ["status", "--json"], ["presence", "list"], ["presence", "list", "--json"], ["presence", "check", "p"],
      ["requeue", "inbox"], ["state", "s"],
    ]
    for command in commands {
      let result = try liaison(command, output: sink)
      #expect(result.status == 74, "\(command), standard output \(sink): \(result.errors)")
      #expect(result.errors.hasPrefix("liaison: Could not write to standard output"), "\(command): \(result.errors)")
      #expect(result.errors.split(separator: "\n").count == 1, "\(command): \(result.errors)")
    }
  }

  /// `receive` acknowledges a message only once its line is written: when standard output
  /// cannot be written, it exits 74 and every message is still there for the next receiver.
  @Test(arguments: Sink.allCases)
  func receiveAcknowledgesNothingItCouldNotPrint(_ sink: Sink) throws {
    let messages = ["m1", "m2", "m3"]
    for message in messages { #expect(try liaison(["send", "inbox", message]).status == 0) }
    for arguments in [["receive", "inbox"], ["receive", "inbox", "--json"], ["receive", "inbox", "--count", "2"]] {
      let failed = try liaison(arguments, output: sink)
      #expect(failed.status == 74, "\(arguments), standard output \(sink): \(failed.errors)")
    }
    let received = try liaison(["receive", "inbox"])
    #expect(received.status == 0)
    #expect(received.output == messages.map { "\"\($0)\"\n" }.joined())
  }

  // MARK: - Input that is not text

  /// Bytes that are not UTF-8 are refused with 65 (EX_DATAERR), on standard input or as an
  /// argument, and nothing is stored; they used to be stored as U+FFFD.
  @Test func bytesThatAreNotUTF8AreRefusedNotAltered() throws {
    let notText: [UInt8] = [0x68, 0x69, 0xFF, 0x0A]
    let sent = try liaison(["send", "inbox", "-"], input: notText)
    #expect(sent.status == 65, "\(sent.errors)")
    #expect(sent.errors.contains("not UTF-8 text (the byte 0xFF at offset 2)"), "\(sent.errors)")
    let written = try liaison(["defaults", "write", "d", "k", "-"], input: notText)
    #expect(written.status == 65, "\(written.errors)")
    // An argument: the shell makes the byte, which a Swift string cannot carry.
    let child = try ChildProcess(
      "/bin/sh", ["-c", "exec \"$0\" defaults write d k \"$(printf 'x\\377')\"", liaisonPath],
      environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
    let (_, errors, termination) = child.finish()
    #expect(termination.shellStatus == 65, "\(errors)")
    #expect(errors.contains("Argument 5 is not UTF-8 text (the byte 0xFF at offset 1)"), "\(errors)")
    #expect(try liaison(["peek", "inbox"]).output.isEmpty)
    #expect(try liaison(["defaults", "read", "d", "k"]).status == 1)
    // UTF-8 text is stored exactly.
    #expect(try liaison(["send", "inbox", "-"], input: Array("héllo ✓\n".utf8)).status == 0)
    #expect(try liaison(["receive", "inbox"]).output == "\"héllo ✓\"\n")
  }

  /// The command that `lock` runs gets its arguments byte for byte, even those that are not
  /// UTF-8 (a file name in another encoding), which are not liaison's to judge; Swift's decoding
  /// used to hand it U+FFFD in their place, another file name.
  @Test func theCommandUnderALockGetsItsArgumentsAsGiven() throws {
    // `ls` finds the file only under its own name (it exits 2 for a name that does not exist).
    let child = try ChildProcess(
      "/bin/sh",
      [
        "-c", "cd \"$1\" && name=\"$(printf 'x\\377')\" && : > \"$name\" && exec \"$0\" lock job -- ls -- \"$name\"",
        liaisonPath, directory.path,
      ],
      environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
    let (_, errors, termination) = child.finish()
    #expect(termination.shellStatus == 0, "\(errors)")
  }

  // MARK: - Control characters in text output

  /// An id, a sender, a holder's info and a payload with line breaks, tabs and escape sequences
  /// print on one line each, escaped; `--json` keeps them exact.
  @Test func textOutputEscapesControlCharacters() throws {
    #expect(
      try liaison(["send", "inbox", "{\"a\":\t1}", "--id", "a\nforged\tline", "--sender", "x\u{1B}[2Jy"]).output
        == "a\\nforged\\tline\n")
    let peek = try liaison(["peek", "inbox"])
    #expect(peek.output == "a\\nforged\\tline\tx\\x1b[2Jy\t{\"a\": 1}\n", "\(peek.output)")
    let json = try liaison(["peek", "inbox", "--json"]).output
    let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
    #expect(object?["id"] as? String == "a\nforged\tline" && object?["sender"] as? String == "x\u{1B}[2Jy")
    #expect(try liaison(["receive", "inbox"]).output == "{\"a\": 1}\n")

    // The claim's command lists the presence, and checks it, while it holds it.
    let info = "one\nforged: two\r\u{1B}[31m\u{85}\u{202E}"
    let listed = try liaison(["presence", "claim", "p", "--info", info, "--", liaisonPath, "presence", "list"])
    #expect(listed.status == 0, "\(listed.errors)")
    #expect(listed.output.split(separator: "\n").count == 1, "\(listed.output)")
    #expect(listed.output.hasSuffix(": one\\nforged: two\\r\\x1b[31m\\u{0085}\\u{202e}\n"), "\(listed.output)")
    for command in [["presence", "check", "p"], ["status"]] {
      let shown = try liaison(["presence", "claim", "p", "--info", info, "--", liaisonPath] + command)
      #expect(shown.output.contains(": one\\nforged: two\\r\\x1b[31m\\u{0085}\\u{202e}\n"), "\(shown.output)")
      #expect(!shown.output.contains("\r") && !shown.output.contains("\u{1B}"), "\(shown.output)")
    }

    // A multi-line JSON value reads back on one line.
    #expect(try liaison(["defaults", "write", "d", "k", "[1,\n2]"]).status == 0)
    #expect(try liaison(["defaults", "read", "d"]).output == "k = [1, 2]\n")
    // An error that quotes what it was given stays one line.
    let refused = try liaison(["status", "--container", directory.path + "/typo\nliaison: forged"])
    #expect(refused.status == 70)
    #expect(refused.errors.split(separator: "\n").count == 1, "\(refused.errors)")
    #expect(refused.errors.contains("/typo\\nliaison: forged"), "\(refused.errors)")
  }

  // MARK: - Messages that name the cause

  /// Short of descriptors (a low `ulimit -n`), every command that fails says so and states the
  /// limit, wherever it ran out: never "check the permissions" (SQLite's "unable to open database
  /// file") nor "raise fs.inotify.max_user_instances" (`inotify_init1`'s EMFILE).
  @Test func outOfDescriptorsTheMessageNamesTheProcesssLimit() throws {
    #expect(try liaison(["send", "inbox", "hello"]).status == 0)
    var messages: Set<String> = []
    // Where each command runs out depends on what it opens first; a range of limits meets each place.
    for limit in 8...40 {
      for command in [
        ["defaults", "write", "d", "k", "1"], ["wait", "s", "--timeout", "0"], ["receive", "inbox", "--no-ack"],
      ] {
        let child = try ChildProcess(
          "/bin/sh", ["-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", liaisonPath] + command,
          environment: environmentWithoutLeakCheck(["LIAISON_CONTAINER": directory.path]), errors: .pipe)
        let (_, errors, termination) = child.finish()
        guard termination.shellStatus == 70 else { continue }
        #expect(
          errors.contains("as many files open as its limit allows (\(limit), `ulimit -n`)"),
          "\(limit) \(command): \(errors)")
        #expect(
          !errors.contains("permissions") && !errors.contains("max_user_instances"), "\(limit) \(command): \(errors)")
        messages.insert(String(errors.prefix(while: { $0 != "." })))
      }
    }
    // The places whose messages used to blame something else were met.
    #expect(messages.contains { $0.hasPrefix("liaison: The store '") }, "\(messages)")
    #if os(Linux)
      #expect(
        messages.contains { $0.hasPrefix("liaison: Could not start watching files (inotify_init1)") }, "\(messages)")
    #endif
  }

  /// A second user of a container (its folder shared with the group, say) is told whose
  /// `.liaison` it is and what to do, not to check permissions it has.
  @Test(
    .enabled(
      if: getuid() == 0 && getpwnam("nobody") != nil
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
      "needs root, the user nobody and setpriv(1)"))
  func anotherUsersContainerNamesItsOwner() throws {
    try #require(chmod(directory.path, 0o777) == 0)
    #expect(try liaison(["post", "s"]).status == 0)  // .liaison is root's, 0700
    let nobody = getpwnam("nobody")!.pointee
    for command in [["post", "s"], ["status"]] {
      let child = try ChildProcess(
        "/usr/bin/setpriv",
        ["--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups", liaisonPath] + command,
        environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
      let (_, errors, termination) = child.finish()
      #expect(termination.shellStatus == 70, "\(command): \(errors)")
      #expect(
        errors.contains(
          "'\(directory.path)/.liaison' belongs to user 0 (root), but this process runs as user \(nobody.pw_uid) (nobody)"
        ),
        "\(command): \(errors)")
      #expect(errors.contains("run this as root, or give each user a container of its own"), "\(command): \(errors)")
      #expect(!errors.contains("Check that this process may"), "\(command): \(errors)")
    }
  }

  // MARK: - JSON

  /// JSON is stored as the JSON given, whatever its syntax asks of a reader; JSON that `liaison`
  /// could not print back (1e400, nesting past 512 levels) is refused, naming why, never stored
  /// as a string (before, each was stored as the string of its text, exit 0).
  @Test func jsonIsStoredAsGivenOrRefusedNeverTurnedIntoAString() throws {
    let deep = String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)
    for json in ["1e400", deep] {
      for command in [["defaults", "write", "d", "k", "-"], ["send", "inbox", "-"]] {
        let refused = try liaison(command, input: Array(json.utf8))
        #expect(refused.status == 64, "\(command): \(refused)")
        #expect(refused.errors.contains("JSON that liaison cannot read back"), "\(refused.errors)")
      }
    }
    #expect(try liaison(["defaults", "read", "d", "k"]).status == 1)
    #expect(try liaison(["peek", "inbox"]).output.isEmpty)
    // Within bounds, the JSON given, as given; what is not JSON, as a string.
    let nested = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
    for (given, stored) in [("1e300", "1e300"), (nested, nested), ("-0.0e-5000", "-0.0e-5000"), ("01", "\"01\"")] {
      #expect(try liaison(["defaults", "write", "d", "k", "-"], input: Array(given.utf8)).status == 0)
      #expect(try liaison(["defaults", "read", "d", "k"]).output == stored + "\n")
    }
  }

  /// The read-modify-write loop of `--if-value` ends for values whose printed form is not their
  /// stored bytes: an object written pretty-printed, with tabs and carriage returns in its layout,
  /// and a string with a carriage return and a tab. `--if-value` takes the value as `defaults
  /// read` prints it (before, it compared the stored bytes, and the loop never ended).
  @Test func theIfValueLoopEndsForEveryValueReadPrints() throws {
    let values = ["{\r\n\t\"runs\": 1,\r\n\t\"name\": \"a\"\r\n}", "\"a\\rb\\tc\"", "x\ry\tz"]
    for (index, value) in values.enumerated() {
      let key = "k\(index)"
      #expect(try liaison(["defaults", "write", "d", key, "-"], input: Array(value.utf8)).status == 0)
      let old = try liaison(["defaults", "read", "d", key])
      #expect(old.status == 0)
      let printed = String(old.output.dropLast())
      let written = try liaison(["defaults", "write", "d", key, "2", "--if-value", printed])
      #expect(written.status == 0, "\(value.debugDescription) printed as \(printed.debugDescription): \(written)")
      #expect(try liaison(["defaults", "read", "d", key]).output == "2\n")
      // A value that is not the one stored writes nothing.
      #expect(try liaison(["defaults", "write", "d", key, "3", "--if-value", printed]).status == 1)
    }
  }

  // MARK: - Damaged messages

  /// A message whose stored bytes are damaged (stored as JSON, not JSON) is never printed as text
  /// nor acknowledged: `peek` shows its bytes with the damage, `receive` prints the others and
  /// quarantines it, where it waits to be looked at (before, both printed it with U+FFFD in
  /// place of its bytes, and `receive` acknowledged it: gone).
  @Test func aDamagedMessageIsQuarantinedNeverPrintedAsTextNorAcknowledged() throws {
    for text in ["one", "two", "three"] { #expect(try liaison(["send", "inbox", text]).status == 0) }
    let store = try DatabaseQueue(path: directory.path + "/.liaison/store/mailboxes.sqlite")
    try store.write { db in
      try db.execute(
        sql: "UPDATE mailbox_message SET payload = X'22FF7477FE22' WHERE payload = CAST('\"two\"' AS BLOB)")
      #expect(db.changesCount == 1)
    }
    try store.close()
    let peeked = try liaison(["peek", "inbox"]).output
    #expect(!peeked.contains("\u{FFFD}"), "\(peeked)")
    #expect(
      peeked.contains("data:Iv90d/4i\t(quarantined: damaged: its payload is stored as JSON but is not JSON"),
      "\(peeked)")
    let received = try liaison(["receive", "inbox"])
    #expect(received.status == 0, "\(received)")
    #expect(received.output == "\"one\"\n\"three\"\n")
    let left = try liaison(["peek", "inbox", "--json"]).output
    #expect(left.contains("\"quarantineReason\":\"damaged: its payload is stored as JSON but is not JSON"), "\(left)")
    #expect(!left.contains("\u{FFFD}"), "\(left)")
    #expect(try liaison(["receive", "inbox"]).output.isEmpty)
  }

  // MARK: - Errors that name their cause

  /// A container at a path too long for SQLite says so, with how much shorter (before: "check the
  /// permissions"); a container that is a file says so; a write that the disk quota refuses gives
  /// the system's reason and what to do (before: "disk I/O error" alone).
  @Test func storeErrorsNameTheirRealCause() throws {
    let long =
      directory.path + "/" + Array(repeating: String(repeating: "a", count: 100), count: 6).joined(separator: "/")
    try FileManager.default.createDirectory(atPath: long, withIntermediateDirectories: true)
    let tooLong = try liaison(["defaults", "write", "d", "k", "v", "--container", long])
    #expect(tooLong.status == 64, "\(tooLong)")
    #expect(tooLong.errors.contains("SQLite opens files by paths of at most 504 bytes"), "\(tooLong.errors)")
    let file = directory.path + "/a-file"
    _ = FileManager.default.createFile(atPath: file, contents: Data())
    let notAFolder = try liaison(["defaults", "write", "d", "k", "v", "--container", file])
    #expect(notAFolder.status == 64 && notAFolder.errors.contains("is a file, not a folder"), "\(notAFolder)")
    #expect(try liaison(["defaults", "write", "d", "k", "v"]).status == 0)
    for log in ["-wal", "-shm"] {
      // Every write to the store's log (a commit), or to its index (the opening), fails as a
      // disk quota used up does.
      let child = try ChildProcess(
        "/usr/bin/strace",
        [
          "-f", "-o", "/dev/null", "-P", directory.path + "/.liaison/store/defaults.sqlite" + log, "-e",
          "trace=pwrite64", "-e", "inject=pwrite64:error=EDQUOT", liaisonPath, "defaults", "write", "d", "k", "w",
        ],
        environment: environmentWithoutLeakCheck(["LIAISON_CONTAINER": directory.path]), errors: .pipe)
      let (_, errors, termination) = child.finish()
      #expect(termination.shellStatus == 70, "\(log): \(errors)")
      #expect(errors.contains("(Disk quota exceeded). The user's disk quota is used up"), "\(log): \(errors)")
    }
    #expect(try liaison(["defaults", "read", "d", "k"]).output == "\"v\"\n")
  }

  // MARK: - Memory

  /// Draining 256 messages of a megabyte each takes a few megabytes at a time, not the whole
  /// batch of 256: `receive` stays under 128 MB of memory (its peak resident size, as the kernel
  /// counts it; not under a sanitizer, whose own memory counts too). Before, it read 256 messages
  /// whatever their size, and took 830 MB.
  @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
  @Test func drainingLargeMessagesTakesBoundedMemory() async throws {
    // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
    // end) never hold a thread of the cooperative pool that the suites beside it need.
    try await withTaskExecutorPreference(OwnThreadExecutor()) {
      let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox")
      let megabyte = Data(repeating: 0x5A, count: 1_000_000)
      // Under a sanitizer, whose memory is not the program's, a few batches' worth: 256 MB through
      // it starved the tests that run beside it.
      let batches = runsUnderASanitizer() ? 1 : 8
      for _ in 0..<batches { try await mailbox.sendAll(Array(repeating: megabyte, count: 32)) }
      let child = try ChildProcess(
        "/usr/bin/time", ["-f", "peak %M KiB", "/bin/sh", "-c", "exec \"$0\" receive inbox >/dev/null", liaisonPath],
        environment: ["LIAISON_CONTAINER": directory.path], errors: .pipe)
      let (_, errors, termination) = child.finish()
      #expect(termination == .exited(0), "\(errors)")
      let kibibytes = try #require(
        errors.split(separator: "\n").last { $0.hasPrefix("peak ") }.flatMap {
          Int($0.split(separator: " ")[1])
        })
      print("receive drained \(32 * batches) messages of 1 MB with a peak of \(kibibytes / 1024) MiB")
      // A sanitizer's shadow memory and quarantine are counted too: the bound is the program's own.
      if !runsUnderASanitizer() { #expect(kibibytes < 128 * 1024, "a peak of \(kibibytes / 1024) MiB") }
      #expect(try mailbox.count() == 0)
    }
  }
}
