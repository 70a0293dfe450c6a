import Dispatch
import Foundation
import Liaison
import LiaisonStore
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model peer

enum ModelScenarios {
  /// `model.visibility`: a `set` here → an `ObservedValue` of the key in another process shows
  /// the new value to a main-actor reader (its `withObservationTracking` fired, and the value was
  /// read on the main actor). Interleaved with `defaults.visibility` (the same `set` →
  /// `changes(of:)` yields it in another process) and `floor.pipe-to-async`. The model is made with
  /// `updateInterval: .zero`: its default interval (16 ms) delays only a change that comes within
  /// 16 ms of the one before, which samples taken back to back would all be.
  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  static func visibility(_ container: SharedContainer) throws -> ScenarioResult {
    let defaults = try container.defaults("bench-model")
    try defaults.set(0, for: DefaultsScenarios.counter)
    let model = try BenchPeer("model-observer", [container.directory, "bench-model"])
    let sequence = try BenchPeer("defaults-observer", [container.directory, "bench-model"])
    let pipeToAsync = try Floor.pipeToAsync()
    let samples = try interleave(
      samples: 500,
      [
        {
          try blocking { try await defaults.set(Int(now()), for: DefaultsScenarios.counter, timeout: nil) }
          let shown = model.readTimestamp()
          _ = sequence.readTimestamp()  // the sequence's peer saw the same set
          return Double(shown)
        },
        {
          try blocking { try await defaults.set(Int(now()), for: DefaultsScenarios.counter, timeout: nil) }
          _ = model.readTimestamp()
          return Double(sequence.readTimestamp())
        },
        pipeToAsync,
      ])
    return ScenarioResult(
      measurement: Measurement("model.visibility", samples[0]), unit: "ns",
      baselines: [Measurement("defaults.visibility", samples[1]), Measurement("floor.pipe-to-async", samples[2])],
      target: "≤ defaults.visibility + one main-actor hop")
  }

  /// The model observer peer: an `ObservedValue` of the counter in `domain`, on the main actor,
  /// answering each value it shows with the time since it was set (the value is that time). The
  /// main thread serves the main actor (`dispatchMain`); a thread of its own ends the process
  /// when the input closes.
  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  static func observe(container: String, domain: String, input: CInt, output: CInt) throws -> Never {
    let place = try SharedContainer(directory: container, createIfMissing: true)
    Task { @MainActor in
      do {
        let model = try await ObservedValue(
          DefaultsScenarios.counter, in: try await place.defaults(domain), updateInterval: .zero)
        follow(model, output: output)
        writeBytes(output, [UInt8(ascii: "r")])
      } catch {
        fatalError("the model observer failed: \(error)")
      }
    }
    Thread.detachNewThread {
      _ = readBytes(input, 1)  // ends the process when the input closes
    }
    dispatchMain()
  }

  /// Answers the model's next value, as a view that reads it after its change would, then
  /// follows the one after.
  @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
  @MainActor private static func follow(_ model: ObservedValue<SharedDefaults, Int>, output: CInt) {
    withObservationTracking {
      _ = model.value
    } onChange: {
      Task { @MainActor in
        writeBytes(output, encodeTimestamp(now() &- UInt64(truncatingIfNeeded: model.value ?? 0)))
        follow(model, output: output)
      }
    }
  }
}
