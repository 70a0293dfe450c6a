import Liaison

enum PresenceScenarios {
  /// `presence.probe`: `isActive` on a presence nobody holds (the slower path: it also reads the
  /// record for a lease), against `floor.probe`. `presence.probe.active` probes one that another
  /// process claims.
  static func probe(_ container: SharedContainer) throws -> [ScenarioResult] {
    let idle = try container.presence("bench-idle")
    try idle.claim().release()  // the file exists, as it does for any presence used before
    let active = try container.presence("bench-active")
    let claimer = try BenchPeer("claimer", [container.directory, "bench-active"])
    defer { withExtendedLifetime(claimer) {} }
    let ready = try active.isActive && !(try idle.isActive)
    precondition(ready, "the presences are not in the state the scenario needs")

    let batch = 200
    let samples = try interleave(
      samples: 300,
      [
        { try timeBatch(batch) { _ = try idle.isActive } },
        { try timeBatch(batch) { _ = try active.isActive } },
        Floor.probe(path: container.directory + "/.liaison/presence/bench-idle", batch: batch),
        Floor.probe(path: container.directory + "/.liaison/presence/bench-active", batch: batch),
      ])
    return [
      ScenarioResult(
        measurement: Measurement("presence.probe", samples[0]), unit: "ns",
        baselines: [Measurement("floor.probe", samples[2])], target: "≤ 1.5× floor.probe"),
      ScenarioResult(
        measurement: Measurement("presence.probe.active", samples[1]), unit: "ns",
        baselines: [Measurement("floor.probe", samples[3])], target: "≤ 1.5× floor.probe"),
    ]
  }

  /// The claimer peer: claims the presence, answers `r`, and holds it until its input closes.
  static func claimAndWait(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let claim = try SharedContainer(directory: container, createIfMissing: true).presence(name).claim(info: "benchmark")
    writeBytes(output, [UInt8(ascii: "r")])
    _ = readBytes(input, 1)  // ends the process when the input closes
    claim.release()
    fatalError("unreachable")
  }
}
