import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The reading commands work on a container seen read-only (a real read-only bind mount); the
/// writing commands fail, saying that the container is read-only.
@Suite("The liaison command on a read-only container")
struct ReadOnlyContainerCommandTests {
  let directory = TemporaryDirectory()

  /// Runs `liaison ARGS` on `container`; returns its shell status and output.
  func liaison(_ arguments: [String], on container: String) throws -> (status: Int32, output: String, errors: String) {
    let child = try ChildProcess(liaisonPath, arguments, environment: ["LIAISON_CONTAINER": container], errors: .pipe)
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  @Test(.enabled(if: ReadOnlyMount.mustRun, "needs root: a read-only bind mount"))
  func readingCommandsWorkAndWritingOnesSayTheContainerIsReadOnly() throws {
    for write in [
      ["defaults", "write", "settings", "theme", "\"dark\""], ["send", "inbox", "hello"], ["post", "ready"],
    ] {
      #expect(try liaison(write, on: directory.path).status == 0, "\(write)")
    }
    let app = try Peer(container: directory.path)
    defer { app.kill() }
    try app.send(.claim, "recording", "episode 7")
    let view = try ReadOnlyMount(of: directory.path)
    defer { view.unmount() }

    let read = try liaison(["defaults", "read", "settings", "theme"], on: view.path)
    #expect(read.status == 0 && read.output == "\"dark\"\n", "\(read)")
    let peeked = try liaison(["peek", "inbox"], on: view.path)
    #expect(peeked.status == 0 && peeked.output.hasSuffix("\t\"hello\"\n"), "\(peeked)")
    let checked = try liaison(["presence", "check", "recording"], on: view.path)
    #expect(checked.status == 0 && checked.output.contains("pid \(app.pid)"), "\(checked)")
    let state = try liaison(["state", "ready"], on: view.path)
    #expect(state.status == 0 && state.output == "0\n", "\(state)")
    let status = try liaison(["status"], on: view.path)
    #expect(status.status == 0 && !status.output.contains("Problems"), "\(status)")
    #expect(status.output.contains("recording") && status.output.contains("inbox"), "\(status)")

    let writes = [
      ["defaults", "write", "settings", "theme", "\"light\""], ["defaults", "delete", "settings", "theme"],
      ["send", "inbox", "again"], ["receive", "inbox"], ["post", "ready"], ["lock", "job", "--", "true"],
      ["presence", "claim", "other", "--", "true"],
    ]
    for write in writes {
      let refused = try liaison(write, on: view.path)
      #expect(refused.status == 70, "\(write): \(refused)")
      #expect(refused.errors.contains("the container is on a read-only file system"), "\(write): \(refused)")
    }
    #expect(try liaison(["defaults", "read", "settings", "theme"], on: directory.path).output == "\"dark\"\n")
  }
}
