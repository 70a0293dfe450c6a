import Dispatch
import Foundation
import Liaison
import LiaisonStore
import LiaisonSwiftUI

#if canImport(SwiftUIModel)
  import SwiftUIModel  // on Linux, the view is hosted in SwiftUI's model (a Mac has no host to run it in)
#endif

enum ViewScenarios {
  /// `view.visibility` where a view can be hosted (Linux, in SwiftUI's model); none elsewhere.
  static func run(_ container: SharedContainer) throws -> [ScenarioResult] {
    #if canImport(SwiftUIModel)
      return [try visibility(container)]
    #else
      return []
    #endif
  }
}

#if canImport(SwiftUIModel)
  extension ViewScenarios {
    /// `view.visibility`: a `set` here → a view in another process, whose `@SharedValue` shows the
    /// key, has evaluated its `body` with the new value. Interleaved with `defaults.visibility` (the
    /// same `set` → `changes(of:)` yields it in another process) and `floor.pipe-to-async`.
    ///
    /// The view is hosted in SwiftUI's model, which evaluates an invalidated `body` at the next turn
    /// of the main actor; SwiftUI evaluates it at the next frame (up to 16.7 ms later at 60 Hz,
    /// which this figure leaves out). The property is made with `updateInterval: .zero`, as
    /// `model.visibility`'s model is: its default interval (16 ms) delays only a change that comes
    /// within 16 ms of the one before, which samples taken back to back would all be.
    static func visibility(_ container: SharedContainer) throws -> ScenarioResult {
      let defaults = try container.defaults("bench-view")
      try defaults.set(0, for: DefaultsScenarios.counter)
      let view = try BenchPeer("view-observer", [container.directory, "bench-view"])
      let sequence = try BenchPeer("defaults-observer", [container.directory, "bench-view"])
      let pipeToAsync = try Floor.pipeToAsync()
      let samples = try interleave(
        samples: 500,
        [
          {
            try blocking { try await defaults.set(Int(now()), for: DefaultsScenarios.counter, timeout: nil) }
            let shown = view.readTimestamp()
            _ = sequence.readTimestamp()  // the sequence's peer saw the same set
            return Double(shown)
          },
          {
            try blocking { try await defaults.set(Int(now()), for: DefaultsScenarios.counter, timeout: nil) }
            _ = view.readTimestamp()
            return Double(sequence.readTimestamp())
          },
          pipeToAsync,
        ])
      return ScenarioResult(
        measurement: Measurement("view.visibility", samples[0]), unit: "ns",
        baselines: [Measurement("defaults.visibility", samples[1]), Measurement("floor.pipe-to-async", samples[2])],
        target: "≤ defaults.visibility + two main-actor hops (the follower's, then the body's)")
    }

    /// A view that shows the counter of `domain`, as an app's would.
    struct CounterView: View {
      @SharedValue<Int> var counter: Int

      init(domain: String) {
        _counter = SharedValue(
          wrappedValue: 0, DefaultsScenarios.counter.name.rawValue, in: domain, updateInterval: .zero)
      }

      var body: Text { Text("\(counter)") }
    }

    /// The view observer peer: a `CounterView` hosted on the main actor, answering each value its
    /// `body` shows with the time since it was set (the value is that time). The main thread serves
    /// the main actor (`dispatchMain`); a thread of its own ends the process when the input closes.
    static func observe(container: String, domain: String, input: CInt, output: CInt) throws -> Never {
      let place = try SharedContainer(directory: container, createIfMissing: true)
      Task { @MainActor in
        let host = ViewHost(CounterView(domain: domain).liaisonContainer(place))
        writeBytes(output, [UInt8(ascii: "r")])
        var evaluated = host.evaluations
        var shown = (host.body as? Text)?.content
        while true {
          await host.waitForEvaluation(after: evaluated)
          evaluated = host.evaluations
          let content = (host.body as? Text)?.content
          guard content != shown, let value = content.flatMap({ Int($0) }) else { continue }
          shown = content
          writeBytes(output, encodeTimestamp(now() &- UInt64(truncatingIfNeeded: value)))
        }
      }
      Thread.detachNewThread {
        _ = readBytes(input, 1)  // ends the process when the input closes
      }
      dispatchMain()
    }
  }
#endif
