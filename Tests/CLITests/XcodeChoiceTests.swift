import Foundation
import LiaisonTestSupport
import Testing

/// `.ci/choose-xcode`, which picks the Xcode of `.github/workflows/apple.yml`: the newest release,
/// never a beta or a release candidate, though `sort -V` puts them last.
@Suite("The Xcode the Apple workflow chooses")
struct XcodeChoiceTests {
  /// The repository: this file is `Tests/CLITests/XcodeChoiceTests.swift`.
  static let repository = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

  /// Runs `.ci/choose-xcode` (with bash, as the workflow does) on `listing`, one path a line.
  func choose(_ listing: [String]) throws -> (termination: Termination, output: String, errors: String) {
    let script = Self.repository.appendingPathComponent(".ci/choose-xcode").path
    let child = try ChildProcess("bash", [script], errors: .pipe)
    for path in listing { child.write(path) }
    let (output, errors, termination) = child.finish()
    return (termination, output, errors)
  }

  @Test func theNewestReleaseWinsOverBetasAndReleaseCandidates() throws {
    let chosen = try choose([
      "/Applications/Xcode.app",  // a symlink, no version
      "/Applications/Xcode_16.4.app",
      "/Applications/Xcode_26.4.app",
      "/Applications/Xcode_26.4.1.app",
      "/Applications/Xcode_26.5_beta_2.app",
      "/Applications/Xcode_26.5_Release_Candidate.app",
      "/Applications/Xcode_26.5_RC.app",
      "/Applications/Xcode_26.3.app",
    ])
    #expect(chosen.termination == .exited(0), "\(chosen.errors)")
    #expect(chosen.output == "/Applications/Xcode_26.4.1.app\n")
  }

  @Test func versionsCompareNumberByNumber() throws {
    let chosen = try choose([
      "/Applications/Xcode_26.9.app", "/Applications/Xcode_26.10.app", "/Applications/Xcode_9.4.app",
    ])
    #expect(chosen.output == "/Applications/Xcode_26.10.app\n", "\(chosen.errors)")
  }

  @Test func aListingWithoutAReleaseFailsAndSaysWhatItSkipped() throws {
    let chosen = try choose([
      "/Applications/Xcode.app", "/Applications/Xcode_26.5_beta_2.app", "/Applications/Xcode_26.5_RC.app",
    ])
    #expect(chosen.termination == .exited(1))
    #expect(chosen.output.isEmpty)
    #expect(chosen.errors.contains("no released Xcode"), "\(chosen.errors)")
    #expect(chosen.errors.contains("Xcode_26.5_beta_2.app"), "\(chosen.errors)")
  }
}
