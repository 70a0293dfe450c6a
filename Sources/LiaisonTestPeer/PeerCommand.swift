/// One command the peer understands: the word that starts it, what follows and what it answers
/// (one line of the peer's manual), and what it does.
///
/// A part's commands are a table in that part's file (`LockCommands.swift`, `MailboxCommands.swift`,
/// …); `main.swift` looks a line's first word up in the tables it lists in `commandTables`.
struct PeerCommand: Sendable {
  let name: String
  /// The arguments and the answer, as the manual (`LiaisonTestPeer --help`) shows them.
  let usage: String
  /// Runs the command on the words of its line (`words[0]` is the name) and returns what follows `ok `.
  let run: @MainActor @Sendable (_ words: [String]) throws -> String

  init(_ name: String, _ usage: String, _ run: @escaping @MainActor @Sendable (_ words: [String]) throws -> String) {
    self.name = name
    self.usage = usage
    self.run = run
  }
}
