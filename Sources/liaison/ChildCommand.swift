import Foundation

/// Runs a command given on the command line (after `--`), with this process's standard input,
/// output and error, and returns the exit status a shell would report for it.
///
/// The command is looked up on `PATH` by `/usr/bin/env`, which exits 127 when it is not found
/// and 126 when it cannot be run.
func runCommand(_ command: [String]) throws -> Int32 {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
  process.arguments = ["--"] + command
  try process.run()
  process.waitUntilExit()
  switch process.terminationReason {
  case .exit: return process.terminationStatus
  case .uncaughtSignal: return 128 + process.terminationStatus
  @unknown default: return ExitStatus.failure
  }
}
