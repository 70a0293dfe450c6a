/// The one task that makes a model follow its part. It is cancelled when the model is released
/// (this object's only owner), which ends the part's watch: no task or watch outlives a model.
package final class ModelFollowing: Sendable {
  private let task = Locked<Task<Void, Never>?>(nil)
  /// How many models' tasks are running in this process: what the tests read to know that a
  /// released model left none behind.
  package static var runningCount: Int { running.withLock { $0 } }
  private static let running = Locked(0)

  init() {}

  /// Starts `body`, on the cooperative pool (not the main actor): it waits there, and hops to
  /// the main actor only to show what changed.
  func start(_ body: @escaping @Sendable () async -> Void) {
    Self.running.withLock { $0 += 1 }
    let started = Task {
      await body()
      Self.running.withLock { $0 -= 1 }
    }
    task.withLock { $0 = started }
  }

  /// Waits `interval` after an update, so that what changes meanwhile comes as one update (the
  /// part's sequence keeps only the newest news); returns at once when the task is cancelled.
  static func rest(_ interval: Duration, on clock: LiaisonClock) async {
    if interval > .zero { try? await clock.sleep(for: interval) }
  }

  /// The clock of `part`'s place (a manual one in the tests), or the system's for a part that
  /// names none.
  static func clock(of part: Any) -> LiaisonClock {
    (part as? any ClockedPart)?.clock ?? .system
  }

  /// Ends the task now.
  func cancel() {
    task.withLock { $0?.cancel() }
  }

  deinit { cancel() }
}

extension LiaisonError {
  /// `error` as a ``LiaisonError``: itself, or one that names it (an error of a backend's own
  /// sequence, which the protocols leave untyped).
  static func from(_ error: any Error, doing what: String) -> LiaisonError {
    if let error = error as? LiaisonError { return error }
    return LiaisonError(.unavailable, "Could not \(what): \(error).", cause: error)
  }
}

/// A part whose place has a clock of its own (``LiaisonClock``): the models that follow it rest
/// on that clock between updates.
package protocol ClockedPart {
  /// The clock of the part's place.
  var clock: LiaisonClock { get }
}

/// A part whose place can be suspended (a folder's: `suspend()` and `resume()`): a model whose
/// part was ended by a suspension waits for the resumption, then follows the part again.
package protocol SuspendablePart {
  /// Returns once the part's place is not suspended (at once when it is not), or when the task
  /// is cancelled.
  func waitUntilResumed() async
}
