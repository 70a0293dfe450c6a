// The "other process" of Liaison's tests.
//
//   LiaisonTestPeer CONTAINER     a folder, or a PostgreSQL place (see PlaceCommands.swift)
//   LiaisonTestPeer --help        lists every command, with its arguments and answer
//
// Reads one command a line on standard input and answers one line on standard output, so that a
// test can drive it step by step and know when each step is done: `ok …` or `error CODE: MESSAGE`.
// A line that starts with no command is answered `error unknown command: …`. It prints
// `ready PID` when it starts. Closing its standard input ends it.
//
// The commands are tables, one per part, in the part's file (`LockCommands.swift`,
// `PresenceCommands.swift`, `SignalCommands.swift`, `DefaultsCommands.swift`,
// `DatabaseCommands.swift`, `MailboxCommands.swift`, `ProcessCommands.swift`, and on any backend
// `PlaceCommands.swift`, `PlaceMailboxCommands.swift`). To add a command, add a case to
// `PeerCommand` (in LiaisonTestSupport, shared with the tests) and a
// `PeerCommandHandler(.command, usage) { words in … }` to its part's table; a new part is a new
// file with its table, listed in `commandTables` below.

import Liaison
import LiaisonTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

let commandTables = [
  lockCommands, presenceCommands, signalCommands, defaultsCommands, databaseCommands, mailboxCommands,
  processCommands, placeCommands, placeDefaultsCommands, placeMailboxCommands, postgresCommands,
]
let commands = Dictionary(
  commandTables.joined().map { ($0.command, $0) },
  uniquingKeysWith: { first, _ in preconditionFailure("two handlers of \(first.command.rawValue)") })
let unhandled = PeerCommand.allCases.filter { commands[$0] == nil }
precondition(unhandled.isEmpty, "no handler for \(unhandled.map(\.rawValue))")

if CommandLine.arguments.dropFirst().first == "--help" {
  for command in commandTables.joined() { say("\(command.command.rawValue) \(command.usage)") }
  exit(0)
}

_ = place  // opened (or the usage or the error said) before `ready`
say("ready \(getpid())")
while let line = readLine() {
  let words = line.split(separator: " ").map(String.init)
  let first = words.first ?? ""
  guard let command = PeerCommand(rawValue: first).flatMap({ commands[$0] }) else {
    say("error unknown command: '\(first)' (LiaisonTestPeer --help lists the commands)")
    continue
  }
  do {
    say("ok \(try command.run(words))")
  } catch let error as LiaisonError {
    say("error \(error.code): \(error.message)")
  } catch {
    say("error \(error)")
  }
}
