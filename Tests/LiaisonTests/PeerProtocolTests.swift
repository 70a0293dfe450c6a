import Foundation
import LiaisonTestSupport
import Testing

/// The test peer's own promises, on which every cross-process test rests: a command it does not
/// know fails the test that sent it, and every ``PeerCommand`` has a handler.
@Suite("The test peer's protocol")
struct PeerProtocolTests {
  let directory = TemporaryDirectory()

  /// A misspelled command in a test does not compile (``PeerCommand``); a line that reaches the
  /// peer all the same (here sent raw) is answered with an error, not with `ok`, and an error
  /// answer is what ``Peer/send(_:_:timeout:)`` throws.
  @Test func aLineThatIsNoCommandIsAnError() throws {
    let peer = try Peer(container: directory.path)
    let misspelled = try peer.ask(line: "lokc job")
    #expect(misspelled.hasPrefix("error unknown command: 'lokc'"), "\(misspelled)")
    let empty = try peer.ask(line: "")
    #expect(empty.hasPrefix("error unknown command: ''"), "\(empty)")
    #expect(throws: PeerError.self) { try peer.send(.claim, "../outside") }
    #expect(try peer.send(.claim, "recording") == "claimed")  // the peer answers on after errors
  }

  /// The manual lists a line per command, so each case has its handler (the peer also refuses to
  /// start without one).
  @Test func everyCommandIsInThePeersManual() throws {
    let peer = try ChildProcess(productsDirectory().appendingPathComponent("LiaisonTestPeer").path, ["--help"])
    let manual = peer.finish()
    #expect(manual.termination == .exited(0), "\(manual.errors)")
    let listed = Set(manual.output.split(separator: "\n").map { String($0.prefix { $0 != " " }) })
    #expect(Set(PeerCommand.allCases.map(\.rawValue)).subtracting(listed).isEmpty, "listed: \(listed.sorted())")
  }
}
