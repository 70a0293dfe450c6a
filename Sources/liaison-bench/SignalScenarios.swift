import Dispatch
import Liaison

enum SignalScenarios {
  /// `signal.latency`: a post here → the observer's `AsyncSequence` yields in another process,
  /// one way, against `floor.pipe-half-rtt`. Each post's state is the time it was posted, and the
  /// observer answers with how long ago that was, so no clock is compared across a pipe.
  static func latency(_ container: SharedContainer) throws -> ScenarioResult {
    let signal = try container.signal("bench-latency")
    let observer = try BenchPeer("signal-observer", [container.directory, "bench-latency"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let samples = try interleave(
      samples: 2000,
      [
        {
          try signal.post(state: now())
          return Double(observer.readTimestamp())
        },
        pipe,
      ])
    return ScenarioResult(
      measurement: Measurement("signal.latency", samples[0]), unit: "ns",
      baselines: [Measurement("floor.pipe-half-rtt", samples[1])],
      target: "p50 ≤ 3× floor.pipe-half-rtt, p99 ≤ 1 ms")
  }

  /// The observer peer: iterates the signal's notifications and answers each with the time
  /// since the post (the state), in nanoseconds.
  static func observe(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let notifications = try SharedContainer(directory: container).signal(name).notifications()
    Task.detached {
      for await notification in notifications {
        writeBytes(output, encodeTimestamp(now() &- notification.state))
      }
    }
    writeBytes(output, [UInt8(ascii: "r")])
    _ = readBytes(input, 1)  // ends the process when the input closes
    fatalError("unreachable")
  }
}
