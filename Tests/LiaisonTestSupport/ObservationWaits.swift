import Foundation
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)

/// A change of what `read` reads on the main actor, once it comes: registered now with
/// `withObservationTracking`, which calls back when one of them is set.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor public func changeOf(_ read: @escaping @MainActor () -> Void) -> Task<Void, Never> {
  let (changed, signal) = AsyncStream.makeStream(of: Void.self)
  withObservationTracking(read) {
    signal.yield()
    signal.finish()
  }
  return Task {
    for await _ in changed { break }
  }
}

/// Waits for `change` (from ``changeOf(_:)``); fails the test after 60 s, a bound for failure.
public func waitForChange(_ change: Task<Void, Never>, _ what: String) async throws {
  let outcome = await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      await change.value
      return true
    }
    group.addTask {
      try? await Task.sleep(for: .seconds(60))
      return false
    }
    defer { group.cancelAll() }
    return await group.next()!
  }
  guard outcome else { throw PeerError("timed out after 60 s waiting for \(what)") }
}

/// Waits, through the model's own observation, until what `read` returns on the main actor
/// satisfies `condition`; fails the test after 60 s.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
public func until<Value: Sendable>(
  _ what: String, observing read: @escaping @MainActor () -> Value,
  satisfies condition: @escaping @Sendable (Value) -> Bool
) async throws {
  while true {
    let changed = await MainActor.run { () -> Task<Void, Never>? in
      if condition(read()) { return nil }
      return changeOf { _ = read() }
    }
    guard let changed else { return }
    try await waitForChange(changed, what)
  }
}

/// Whether this system has Observation, which the models need (Linux has it; Apple's systems
/// from macOS 14 and iOS 17): the models' tests are enabled by it.
public var modelsExist: Bool {
  if #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) { return true }
  return false
}
