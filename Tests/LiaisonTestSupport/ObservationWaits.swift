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

/// Waits for `change` (from ``changeOf(_:)``, or any task that ends on the change); fails the
/// test after `bound` (60 s unless given), a bound for failure, not for speed. The wait ends at
/// the bound even though `change` goes on (awaiting a task's value cannot be cancelled, so a task
/// group would wait for it).
public func waitForChange(_ change: Task<Void, Never>, _ what: String, bound: Duration = .seconds(60)) async throws {
  let outcome = FirstOutcome()
  let came = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
    outcome.continuation = continuation
    Task {
      await change.value
      outcome.finish(true)
    }
    Task {
      try? await Task.sleep(for: bound)
      outcome.finish(false)
    }
  }
  guard came else { throw PeerError("timed out after \(bound) waiting for \(what)") }
}

/// Resumes a continuation once, with the first of two outcomes.
private final class FirstOutcome: @unchecked Sendable {
  private let lock = NSLock()
  private var resumed = false
  var continuation: CheckedContinuation<Bool, Never>?

  func finish(_ value: Bool) {
    let continuation = lock.withLock { () -> CheckedContinuation<Bool, Never>? in
      guard !resumed else { return nil }
      resumed = true
      return self.continuation
    }
    continuation?.resume(returning: value)
  }
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
