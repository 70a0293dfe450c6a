#if canImport(SwiftUIModel)
  import SwiftUIModel

  /// Waits until the host's last `body` is `text`, evaluation after evaluation; fails after 300 s
  /// without one (see below).
  @MainActor public func evaluations(of host: ViewHost, until text: Text) async throws {
    try await evaluations(of: host, until: "'\(text.content)'") { $0 == text }
  }

  /// Waits until the host's last `body` is a text that satisfies `condition` (`what` says what it
  /// waits for), evaluation after evaluation; fails after 300 s without one: a bound for failure,
  /// not for speed. A view's update needs the cooperative pool, which the synchronous suites
  /// beside it keep busy: a second inbox's takeover took 140 s in a full run, and more than 60 s
  /// under Thread Sanitizer.
  @MainActor public func evaluations(
    of host: ViewHost, until what: String, _ condition: (Text) -> Bool
  ) async throws {
    while !((host.body as? Text).map(condition) ?? false) {
      let count = host.evaluations
      try await waitForChange(
        Task { await host.waitForEvaluation(after: count) }, "the view to show \(what)", bound: .seconds(300))
    }
  }
#endif
