// liaison-bench: each scenario with its baselines measured in the same run.
//
//   swift run -c release liaison-bench [SCENARIO…] [--json]
//   swift run -c release liaison-bench scale   (cost per operation as the work grows; ScaleScenarios.swift)
//   swift run -c release liaison-bench instructions [OPERATION…] [--json]
//     (instructions per operation under callgrind; InstructionCounts.swift)
//   swift run liaison-bench chaos [--processes N] [--seconds S] [--seed N] [--sabotage] [--postgres]
//                                                      (see Chaos.swift, PostgresChaos.swift)
//   swift run -c release --traits Postgres liaison-bench postgres [--url URL] [--json] [--runs N]
//     (LiaisonPostgres against postgres-nio and psycopg; PostgresBench.swift)
//   swift run -c release --traits Postgres liaison-bench postgres-scale [--url URL] [--processes 1,4,16,64]
//     (how the PostgreSQL parts grow with client processes; PostgresScale.swift)
//
// Scenarios: lock.uncontended, lock.handoff, lock.handoff.kill, presence.probe, presence.release.kill, signal.latency, defaults.get,
// defaults.set, defaults.visibility, model.visibility, view.visibility, database.observation, mailbox.latency, mailbox.throughput,
// suspend.interrupting, suspend.reopening,
// and those that run with another: lock.handoff.async, presence.probe.active,
// signal.latency.callback, signal.latency.queue.

import Foundation
import Liaison

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--peer" {
  try PeerRole.run(arguments[1], Array(arguments.dropFirst(2)))
}

if arguments.first == "--count" {
  try InstructionCounts.child(Array(arguments.dropFirst()))
}

if arguments.first == "instructions" {
  exit(InstructionCounts.main(Array(arguments.dropFirst())))
}

if arguments.first == "chaos" {
  guard let options = Chaos.parse(Array(arguments.dropFirst())) else {
    FileHandle.standardError.write(Data((Chaos.usage + "\n").utf8))
    exit(64)
  }
  if options.postgres {
    #if Postgres
      exit(try PostgresChaos.run(options) == 0 ? 0 : 1)
    #else
      FileHandle.standardError.write(Data("chaos --postgres needs the package trait: --traits Postgres\n".utf8))
      exit(64)
    #endif
  }
  exit(try Chaos.run(options) == 0 ? 0 : 1)
}

if arguments.first == "postgres" {
  exit(PostgresBench.main(Array(arguments.dropFirst())))
}

if arguments.first == "postgres-scale" {
  exit(PostgresScale.main(Array(arguments.dropFirst())))
}

if arguments.first == "scale" {
  let directory = NSTemporaryDirectory() + "liaison-scale-\(getpid())"
  defer { try? FileManager.default.removeItem(atPath: directory) }
  print(ScaleScenarios.table(try ScaleScenarios.run(try SharedContainer(directory: directory, createIfMissing: true))))
  exit(0)
}

let families: [(names: [String], run: (SharedContainer) throws -> [ScenarioResult])] = [
  (["lock.uncontended"], { [try LockScenarios.uncontended($0)] }),
  (["lock.handoff", "lock.handoff.async"], LockScenarios.handoff),
  (["lock.handoff.kill"], { [try CrashScenarios.lockHandoff($0)] }),
  (["presence.release.kill"], { [try CrashScenarios.presenceRelease($0)] }),
  (["presence.probe", "presence.probe.active"], PresenceScenarios.probe),
  (["signal.latency", "signal.latency.callback", "signal.latency.queue"], SignalScenarios.latency),
  (["defaults.get"], { [try DefaultsScenarios.get($0)] }),
  (["defaults.set"], { [try DefaultsScenarios.set($0)] }),
  (["defaults.visibility"], { [try DefaultsScenarios.visibility($0)] }),
  (
    ["model.visibility"],
    {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return [] }
      return [try ModelScenarios.visibility($0)]
    }
  ),
  (["view.visibility"], ViewScenarios.run),
  (["database.observation"], { [try DatabaseScenarios.observation($0)] }),
  (["mailbox.latency"], { [try MailboxScenarios.latency($0)] }),
  (["mailbox.throughput"], { [try MailboxScenarios.throughput($0)] }),
  (["suspend.interrupting"], { [try SuspensionScenarios.interrupting($0)] }),
  (["suspend.reopening"], { [try SuspensionScenarios.reopening($0)] }),
]
let allNames = families.flatMap(\.names)

if arguments.contains("--help") || arguments.contains("-h") {
  print("usage: liaison-bench [SCENARIO…] [--json]\nscenarios: \(allNames.joined(separator: ", "))")
  exit(0)
}
let json = arguments.contains("--json")
let wanted = arguments.filter { $0 != "--json" }
for name in wanted where !allNames.contains(name) {
  FileHandle.standardError.write(
    Data("liaison-bench: unknown scenario '\(name)'; known: \(allNames.joined(separator: ", "))\n".utf8))
  exit(64)
}

let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("liaison-bench-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: directory) }
let container = try SharedContainer(directory: directory, createIfMissing: true)

var results: [ScenarioResult] = []
for family in families where wanted.isEmpty || family.names.contains(where: wanted.contains) {
  for result in try family.run(container) where wanted.isEmpty || wanted.contains(result.measurement.name) {
    results.append(result)
    if !json { printText(result) }
  }
}
if json {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  print(String(decoding: try encoder.encode(Report(results)), as: UTF8.self))
}
