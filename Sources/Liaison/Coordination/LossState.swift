/// How a held lock or claim tells its holder that it was lost: the reason, kept once known, and
/// the tasks waiting for it. Kept inside the holder's own `Locked` state, so that it costs no
/// allocation while nobody waits.
package struct LossState: Sendable {
  /// Why the hold was lost; `nil` while held, and after its holder released it.
  package private(set) var loss: LiaisonError?
  /// Whether the hold has ended, lost or released: waiting then returns at once.
  package private(set) var ended = false
  /// Numbered waiters; an array, not a dictionary: rarely more than one, and an empty array costs
  /// nothing to make (every lock grant makes a `LossState`).
  private var waiters: [(number: Int, waiter: CheckedContinuation<LiaisonError?, Never>)] = []
  private var nextWaiter = 0

  package init() {}

  /// Ends the hold, lost when `loss` is given; returns the waiters to resume, outside the lock.
  package mutating func end(_ loss: LiaisonError?) -> [CheckedContinuation<LiaisonError?, Never>] {
    guard !ended else { return [] }
    ended = true
    self.loss = loss
    defer { waiters = [] }
    return waiters.map(\.waiter)
  }

  /// Makes a hold that ended held again (a claim that `resume()` took back).
  package mutating func restart() {
    ended = false
    loss = nil
  }

  fileprivate mutating func add(_ waiter: CheckedContinuation<LiaisonError?, Never>) -> Int? {
    guard !ended else { return nil }
    nextWaiter += 1
    waiters.append((nextWaiter, waiter))
    return nextWaiter
  }

  fileprivate mutating func remove(_ id: Int) -> CheckedContinuation<LiaisonError?, Never>? {
    guard let index = waiters.firstIndex(where: { $0.number == id }) else { return nil }
    return waiters.remove(at: index).waiter
  }
}

extension Locked {
  /// Waits until the hold whose ``LossState`` is at `path` ends: returns the loss, or `nil` when
  /// its holder released it or the task was cancelled.
  package func waitForLoss(_ path: WritableKeyPath<Value, LossState> & Sendable) async -> LiaisonError? {
    // The waiter's number once added; `cancelled` when the cancellation came first.
    let cancelled = -1
    let number = Locked<Int?>(nil)
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (waiter: CheckedContinuation<LiaisonError?, Never>) in
        let added = withLock { value -> Int? in
          number.withLock { number -> Int? in
            guard number != cancelled, let added = value[keyPath: path].add(waiter) else { return nil }
            number = added
            return added
          }
        }
        if added == nil { waiter.resume(returning: withLock { $0[keyPath: path].loss }) }
      }
    } onCancel: {
      let added = number.withLock { number -> Int? in
        defer { if number == nil { number = cancelled } }
        return number
      }
      guard let added else { return }
      withLock { $0[keyPath: path].remove(added) }?.resume(returning: nil)
    }
  }
}

extension Locked {
  /// Waits until the hold whose ``LossState`` is at `path` ends: returns the loss, or `nil` when
  /// its holder released it.
  ///
  /// - Parameter what: what the caller waits for, as "waiting for …", for the message.
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled while the hold lasts.
  package func waitForLoss(_ path: WritableKeyPath<Value, LossState> & Sendable, what: String)
    async throws(LiaisonError) -> LiaisonError?
  {
    let loss = await waitForLoss(path)
    if loss == nil, Task.isCancelled, !withLock({ $0[keyPath: path].ended }) { throw .cancelled(what) }
    return loss
  }
}

extension [CheckedContinuation<LiaisonError?, Never>] {
  package func resumeAll(_ loss: LiaisonError?) {
    for waiter in self { waiter.resume(returning: loss) }
  }
}
