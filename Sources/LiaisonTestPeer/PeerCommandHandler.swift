import LiaisonTestSupport

/// What the peer does for one ``PeerCommand``: what follows the command on its line and what it
/// answers (one line of the peer's manual), and how it runs.
///
/// A part's handlers are a table in that part's file (`LockCommands.swift`, `MailboxCommands.swift`,
/// …); `main.swift` looks a line's first word up in the tables it lists in `commandTables`.
struct PeerCommandHandler: Sendable {
  let command: PeerCommand
  /// The arguments and the answer, as the manual (`LiaisonTestPeer --help`) shows them.
  let usage: String
  /// Runs the command on the words of its line (`words[0]` is the command) and returns what follows `ok `.
  let run: @MainActor @Sendable (_ words: [String]) throws -> String

  init(
    _ command: PeerCommand, _ usage: String,
    _ run: @escaping @MainActor @Sendable (_ words: [String]) throws -> String
  ) {
    self.command = command
    self.usage = usage
    self.run = run
  }
}
