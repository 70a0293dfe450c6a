// A Linux daemon and the command-line tool that drives it, sharing one container: the daemon
// claims a presence and receives a mailbox; the tool checks the presence, sends jobs and changes
// a setting that the daemon observes.
// snippet.hide
import Foundation
import Liaison
import LiaisonStore

struct SyncJob: Codable, Sendable { let path: String }
func perform(_ job: SyncJob) async throws {}
func reloadConfiguration(_ interval: Int?) {}

// snippet.show
// snippet.daemon
func runDaemon() async throws {
  let container = try SharedContainer.standard()  // $LIAISON_CONTAINER, else a per-user folder
  let claim = try container.presence("syncd").claim(info: "syncd 1.2")  // a second daemon throws
  defer { claim.release() }  // and the kernel releases it if the daemon dies

  let settings = try await container.defaults("syncd")
  let interval = DefaultsKey<Int>("interval")
  Task {
    for try await value in try await settings.changes(of: interval) { reloadConfiguration(value) }
  }

  let jobs = try await container.mailbox("sync-jobs").receiver()
  for try await envelope in jobs.messages(SyncJob.self) {
    try await perform(envelope.payload)
    try await jobs.acknowledge(envelope)  // a job the daemon died on is delivered again
  }
}
// snippet.end
// snippet.hide

// snippet.show
// snippet.tool
func runTool(path: String) async throws {
  let container = try SharedContainer.standard()
  if let holder = try container.presence("syncd").holder {
    print("syncd runs as pid \(holder.processID) since \(holder.since)")
  } else {
    print("syncd is not running; the job waits for it")
  }
  let jobs = try await container.mailbox("sync-jobs", sender: "syncctl")
  try await jobs.send(SyncJob(path: path))

  let settings = try await container.defaults("syncd")
  try await settings.set(60, for: DefaultsKey<Int>("interval"))  // the daemon sees it at once
}
// snippet.end
// snippet.hide
