import Dispatch
import Liaison

enum SignalScenarios {
  /// `signal.latency`: a post here → the observer's `AsyncSequence` yields in another process,
  /// one way, against `floor.pipe-to-async` (the cheapest async delivery) and
  /// `floor.pipe-half-rtt`. `signal.latency.callback` is the same post delivered to a handler on
  /// the event-loop thread (`observeOnEventLoop`), against the pipe; `signal.latency.queue` to
  /// `observe(on:)`'s handler on a serial queue, against the async floor (a queue's thread is
  /// woken as a task's is). Each post's state is the time it
  /// was posted, and the observer answers with how long ago that was, so no clock is compared
  /// across a pipe.
  static func latency(_ container: SharedContainer) throws -> [ScenarioResult] {
    let sequenceSignal = try container.signal("bench-latency")
    let callbackSignal = try container.signal("bench-latency-callback")
    let queueSignal = try container.signal("bench-latency-queue")
    let sequenceObserver = try BenchPeer("signal-observer", [container.directory, "bench-latency", "sequence"])
    let callbackObserver = try BenchPeer(
      "signal-observer", [container.directory, "bench-latency-callback", "callback"])
    let queueObserver = try BenchPeer("signal-observer", [container.directory, "bench-latency-queue", "queue"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let pipeToAsync = try Floor.pipeToAsync()
    #if os(Linux)
      let inotifyFile = try Floor.inotifyFile(directory: container.directory)
    #else
      let inotifyFile: () -> Double = { .nan }
    #endif
    func sample(_ signal: Signal, _ observer: BenchPeer) -> () throws -> Double {
      {
        try signal.post(state: now())
        return Double(observer.readTimestamp())
      }
    }
    let samples = try interleave(
      samples: 2000,
      [
        sample(sequenceSignal, sequenceObserver), sample(callbackSignal, callbackObserver),
        sample(queueSignal, queueObserver), pipeToAsync, pipe, inotifyFile,
      ])
    let asyncFloor = Measurement("floor.pipe-to-async", samples[3])
    let pipeFloor = Measurement("floor.pipe-half-rtt", samples[4])
    // Where inotify exists: the doorbell's own floor (on Apple platforms a post rings notify(3)).
    let fileFloor = samples[5].allSatisfy(\.isNaN) ? [] : [Measurement("floor.inotify-file", samples[5])]
    return [
      ScenarioResult(
        measurement: Measurement("signal.latency", samples[0]), unit: "ns", baselines: [asyncFloor, pipeFloor],
        target: "p50 ≤ 2× floor.pipe-to-async, p99 ≤ 1 ms"),
      ScenarioResult(
        measurement: Measurement("signal.latency.callback", samples[1]), unit: "ns",
        baselines: [pipeFloor] + fileFloor,
        target: "p50 ≤ 3× floor.pipe-half-rtt"),
      ScenarioResult(
        measurement: Measurement("signal.latency.queue", samples[2]), unit: "ns", baselines: [asyncFloor, pipeFloor],
        target: "(informational: observe(on:) with a serial queue)"),
    ]
  }

  /// The observer peer: answers each notification with the time since the post (the state), in
  /// nanoseconds. `sequence` iterates `notifications()` in a task; `callback` uses
  /// `observeOnEventLoop`; `queue` uses `observe(on:)` with a serial queue of its own.
  ///
  /// Not yet written once with PostgreSQL's observer and post (PostgresScenarios.swift): at this
  /// commit a process that only observes a folder's signal spins on its event-loop thread (each
  /// read of the record opens and closes the file, and the close is an `IN_CLOSE_WRITE` the
  /// watch reports, which reads again), and with the shared forms the scenario did not end within
  /// 100 s where this one ends in about 25; so no A/B could say they cost the same. With that
  /// spin patched away locally, a post through the protocol's `async` form (in a task, as
  /// PostgreSQL's) measured 1.15–1.18× the synchronous post here, and 1.54–1.57× for the callback:
  /// the posts stay synchronous; the observer could be shared once an A/B says it costs the same.
  static func observe(container: String, name: String, mode: String, input: CInt, output: CInt) throws -> Never {
    let signal = try SharedContainer(directory: container, createIfMissing: true).signal(name)
    var observation: SignalObservation?
    if mode == "callback" {
      observation = try signal.observeOnEventLoop { notification in
        writeBytes(output, encodeTimestamp(now() &- notification.state))
      }
    } else if mode == "queue" {
      observation = try signal.observe(on: DispatchQueue(label: "bench-observer")) { notification in
        writeBytes(output, encodeTimestamp(now() &- notification.state))
      }
    } else {
      let notifications = try signal.notifications()
      Task.detached {
        for await notification in notifications {
          writeBytes(output, encodeTimestamp(now() &- notification.state))
        }
      }
    }
    writeBytes(output, [UInt8(ascii: "r")])
    _ = readBytes(input, 1)  // ends the process when the input closes
    withExtendedLifetime(observation) {}
    fatalError("unreachable")
  }
}
