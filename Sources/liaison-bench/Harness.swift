import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Nanoseconds on the monotonic clock every process shares.
@inline(__always)
func now() -> UInt64 {
  var time = timespec()
  clock_gettime(CLOCK_MONOTONIC, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The samples of one measured thing, with its median and 99th percentile.
struct Measurement: Encodable {
  private(set) var name: String
  let median: Double
  let p99: Double
  let samples: Int

  init(_ name: String, _ values: [Double]) {
    precondition(!values.isEmpty, "no samples for \(name)")
    let sorted = values.sorted()
    self.name = name
    median = sorted[sorted.count / 2]
    p99 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.down)))]
    samples = values.count
  }

  /// The same figures under another name.
  func renamed(_ newName: String) -> Measurement {
    var copy = self
    copy.name = newName
    return copy
  }
}

/// A scenario's result: its measurement and its baselines from the same run.
struct ScenarioResult {
  let measurement: Measurement
  let unit: String
  let baselines: [Measurement]
  /// What the scenario's target is, for the text report.
  let target: String
}

/// The JSON shape: `{"scenarios":[{"name","unit","samples","median","p99","baselines":[…]}]}`.
struct Report: Encodable {
  struct Scenario: Encodable {
    struct Baseline: Encodable {
      let name: String
      let median: Double
      let p99: Double
      /// The scenario's median divided by this baseline's.
      let ratio: Double
    }
    let name: String
    let unit: String
    let samples: Int
    let median: Double
    let p99: Double
    let baselines: [Baseline]
  }
  let scenarios: [Scenario]

  init(_ results: [ScenarioResult]) {
    scenarios = results.map { result in
      Scenario(
        name: result.measurement.name, unit: result.unit, samples: result.measurement.samples,
        median: result.measurement.median, p99: result.measurement.p99,
        baselines: result.baselines.map {
          .init(name: $0.name, median: $0.median, p99: $0.p99, ratio: result.measurement.median / $0.median)
        })
    }
  }
}

func printText(_ result: ScenarioResult) {
  func figure(_ value: Double) -> String {
    if result.unit != "ns" { return String(format: "%.0f %@", value, result.unit) }
    if value >= 1_000_000 { return String(format: "%.2f ms", value / 1e6) }
    if value >= 10_000 { return String(format: "%.1f µs", value / 1e3) }
    return String(format: "%.0f ns", value)
  }
  let m = result.measurement
  // 30 columns, or as many as the longest name needs.
  let width = max(30, ([m.name] + result.baselines.map { "  " + $0.name }).map(\.count).max()! + 1)
  print(
    m.name.padding(toLength: width, withPad: " ", startingAt: 0)
      + "median \(figure(m.median).leftPad(10))   p99 \(figure(m.p99).leftPad(10))   (\(m.samples) samples)")
  for baseline in result.baselines {
    print(
      ("  " + baseline.name).padding(toLength: width, withPad: " ", startingAt: 0)
        + "median \(figure(baseline.median).leftPad(10))   p99 \(figure(baseline.p99).leftPad(10))   "
        + String(format: "scenario/baseline %.3g×", m.median / baseline.median))
  }
  print("  target: \(result.target)\n")
}

extension String {
  func leftPad(_ width: Int) -> String {
    count >= width ? self : String(repeating: " ", count: width - count) + self
  }
}

/// Times `operations` runs of `body` per sample and returns nanoseconds per operation.
@inline(__always)
func timeBatch(_ operations: Int, _ body: () throws -> Void) rethrows -> Double {
  let start = now()
  for _ in 0..<operations { try body() }
  return Double(now() - start) / Double(operations)
}

/// Alternates samples of several measured things, so that drift of a noisy machine affects
/// them alike, and returns their samples in order.
func interleave(samples: Int, _ bodies: [() throws -> Double]) throws -> [[Double]] {
  var results = Array(repeating: [Double](), count: bodies.count)
  for _ in 0..<samples {
    for (index, body) in bodies.enumerated() { results[index].append(try body()) }
  }
  return results
}
