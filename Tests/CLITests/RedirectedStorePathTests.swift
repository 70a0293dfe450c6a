import Foundation
import LiaisonTestSupport
import Testing

/// SQLite opens the store's files by path: a store whose path another user could redirect is
/// refused, with two real users — root running `liaison`, and `nobody` doing what an attacker who
/// owns a folder on the path would.
@Suite("A store whose path another user can redirect")
struct RedirectedStorePathTests {
  let directory = TemporaryDirectory()

  func liaison(_ arguments: [String], container: String) throws -> (status: Int32, output: String, errors: String) {
    let child = try ChildProcess(liaisonPath, arguments, environment: ["LIAISON_CONTAINER": container], errors: .pipe)
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  /// Runs `script` with `sh` as user `nobody`.
  func asAnotherUser(_ script: String) throws {
    let child = try ChildProcess(
      "/usr/bin/setpriv",
      ["--reuid=\(anotherUserID)", "--regid=\(anotherUserID)", "--clear-groups", "--", "/bin/sh", "-c", script],
      errors: .pipe)
    let (_, errors, termination) = child.finish()
    guard termination.shellStatus == 0 else { throw PeerError("as nobody, `\(script)` failed: \(errors)") }
  }

  /// The attack as reported: root's container sits in a folder that `nobody` owns, who can move
  /// it aside and put a link to a tree of theirs in its place. Every command that opens the store
  /// refuses, naming the folder and its owner, before and after the swap, and no database is
  /// made in that tree.
  @Test(.enabled(if: UnprivilegedPeer.isAvailable, "needs root and setpriv"))
  func aContainerInAFolderOfAnotherUserIsRefusedForTheStore() throws {
    try setPermissions(directory.path, 0o755)  // for nobody to reach their folder
    let theirs = directory.path + "/theirs"
    let container = theirs + "/app"
    try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: true)
    try setPermissions(container, 0o700)
    #expect(try liaison(["defaults", "write", "app", "token", "secret"], container: container).status == 0)
    #expect(try liaison(["send", "inbox", "hello"], container: container).status == 0)

    try changeOwner(theirs, to: anotherUserID)
    let commands = [
      ["defaults", "read", "app", "token"], ["peek", "inbox"], ["defaults", "write", "app", "token", "other"],
      ["send", "inbox", "hello"],
    ]
    let refusal = "'\(theirs)' belongs to user 'nobody' (uid \(anotherUserID))"
    for command in commands {
      let result = try liaison(command, container: container)
      #expect(result.status == 70 && result.errors.contains(refusal), "\(command): \(result)")
    }
    #expect(try liaison(["post", "ready"], container: container).status == 0)  // signals open no path

    // Swapped: the commands that write refuse as before; those that only read find no container there.
    try asAnotherUser("cd '\(theirs)' && mv app app.aside && mkdir planted && chmod 755 planted && ln -s planted app")
    for command in commands {
      let result = try liaison(command, container: container)
      let writes = ["write", "send"].contains(command[command[0] == "defaults" ? 1 : 0])
      #expect(result.status == 70 && (!writes || result.errors.contains(refusal)), "\(command): \(result)")
    }
    let made = FileManager.default.enumerator(atPath: theirs + "/planted")?.compactMap { $0 as? String } ?? []
    #expect(!made.contains { $0.contains(".sqlite") }, "\(made)")
  }

  /// A folder on the path that everyone may write, without the sticky bit, is refused as well; with
  /// it (as `/tmp` has), others cannot move this user's folders, and the store opens.
  @Test func aFolderOthersMayWriteIsRefusedUnlessSticky() throws {
    let shared = directory.path + "/shared"
    try FileManager.default.createDirectory(atPath: shared + "/app", withIntermediateDirectories: true)
    try setPermissions(shared, 0o777)
    let refused = try liaison(["defaults", "write", "app", "token", "secret"], container: shared + "/app")
    #expect(refused.status == 70)
    #expect(refused.errors.contains("'\(shared)' can be written by other users (mode 777)"), "\(refused.errors)")

    try setPermissions(shared, 0o1777)
    #expect(try liaison(["defaults", "write", "app", "token", "secret"], container: shared + "/app").status == 0)
    #expect(try liaison(["defaults", "read", "app", "token"], container: shared + "/app").output == "\"secret\"\n")
  }
}
