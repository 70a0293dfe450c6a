#if canImport(SwiftUIModel)
  import SwiftUIModel

  /// Waits until the host's last `body` is `text`, evaluation after evaluation; fails after 60 s.
  @MainActor public func evaluations(of host: ViewHost, until text: Text) async throws {
    try await evaluations(of: host, until: "'\(text.content)'") { $0 == text }
  }

  /// Waits until the host's last `body` is a text that satisfies `condition` (`what` says what it
  /// waits for), evaluation after evaluation; fails after 60 s.
  @MainActor public func evaluations(
    of host: ViewHost, until what: String, _ condition: (Text) -> Bool
  ) async throws {
    while !((host.body as? Text).map(condition) ?? false) {
      let count = host.evaluations
      try await waitForChange(Task { await host.waitForEvaluation(after: count) }, "the view to show \(what)")
    }
  }
#endif
