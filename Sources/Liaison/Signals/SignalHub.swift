/// The observers of signals in this process: one event-loop watch per signal file, however many
/// observers it has, and the sequence numbers this process posted (so that observers may ignore
/// their own process's posts exactly, even when notifications coalesce).
final class SignalHub: Sendable {
  static let shared = SignalHub()

  private struct Observer {
    var lastSequence: UInt64
    let ignoringOwnPosts: Bool
    let deliver: @Sendable (SignalNotification) -> Void
  }

  private struct Watched {
    let file: SignalFile
    var registration: EventRegistration?
    var observers: [UInt64: Observer] = [:]
    /// Sequence numbers of this process's posts not yet seen by every observer.
    var ownPosts: Set<UInt64> = []
  }

  private struct State {
    var watched: [FileKey: Watched] = [:]
    var nextID: UInt64 = 0
  }

  private let state = Locked(State())

  /// Adds an observer of `file`; returns its id for ``unsubscribe(_:id:)``.
  ///
  /// The watch is in place before the current sequence is read, so a post after this returns
  /// is always delivered.
  func subscribe(
    _ file: SignalFile, ignoringOwnPosts: Bool, deliver: @escaping @Sendable (SignalNotification) -> Void
  ) throws(LiaisonError) -> UInt64 {
    let key = file.key
    let (id, needsWatch) = state.withLock { state -> (UInt64, Bool) in
      state.nextID += 1
      let needsWatch = state.watched[key] == nil
      if needsWatch { state.watched[key] = Watched(file: file) }
      state.watched[key]!.observers[state.nextID] = Observer(
        lastSequence: .max, ignoringOwnPosts: ignoringOwnPosts, deliver: deliver)
      return (state.nextID, needsWatch)
    }
    do throws(LiaisonError) {
      if needsWatch {
        let registration = try EventLoop.watch(.file(descriptor: file.descriptor, doorbell: file.doorbell)) {
          SignalHub.shared.fire(key)
        }
        let unused = state.withLock { state -> EventRegistration? in
          guard state.watched[key] != nil else { return registration }  // unsubscribed meanwhile
          state.watched[key]!.registration = registration
          return nil
        }
        unused?.cancel()
      }
      let sequence = try file.read().sequence
      state.withLock { state in
        if state.watched[key]?.observers[id]?.lastSequence == .max {
          state.watched[key]!.observers[id]!.lastSequence = sequence
        }
      }
    } catch {
      unsubscribe(key, id: id)
      throw error
    }
    return id
  }

  /// Removes an observer; the last one of a file ends its watch.
  func unsubscribe(_ key: FileKey, id: UInt64) {
    // The registration is cancelled outside the lock: cancelling the event loop's last
    // registration joins its thread, which may be waiting for this lock in `fire`.
    let registration = state.withLock { state -> EventRegistration? in
      guard state.watched[key]?.observers.removeValue(forKey: id) != nil else { return nil }
      guard state.watched[key]!.observers.isEmpty else { return nil }
      return state.watched.removeValue(forKey: key)?.registration
    }
    registration?.cancel()
  }

  /// Records that this process is posting `sequence` on `key`, if anything here observes it.
  func noteOwnPost(_ key: FileKey, sequence: UInt64) {
    state.withLock { state in
      guard state.watched[key] != nil else { return }
      state.watched[key]!.ownPosts.insert(sequence)
    }
  }

  /// Called on the event loop when the file changed: delivers to every observer that has not
  /// seen the current sequence.
  private func fire(_ key: FileKey) {
    guard let file = state.withLock({ $0.watched[key]?.file }) else { return }
    // A corrupt or vanished record wakes nobody; readers of `state` get the error.
    guard let record = try? file.read() else { return }
    let notification = SignalNotification(name: file.name, state: record.state, sequence: record.sequence)
    let deliveries = state.withLock { state -> [@Sendable (SignalNotification) -> Void] in
      guard var watched = state.watched[key] else { return [] }
      var deliveries: [@Sendable (SignalNotification) -> Void] = []
      for (id, observer) in watched.observers
      where observer.lastSequence != .max && record.sequence != observer.lastSequence {
        let range = observer.lastSequence &+ 1...max(observer.lastSequence &+ 1, record.sequence)
        let allOwn = watched.ownPosts.filter { range.contains($0) }.count == range.count
        if !(observer.ignoringOwnPosts && allOwn) { deliveries.append(observer.deliver) }
        watched.observers[id]!.lastSequence = record.sequence
      }
      let oldest = watched.observers.values.map(\.lastSequence).min() ?? record.sequence
      watched.ownPosts = watched.ownPosts.filter { $0 > oldest }
      state.watched[key] = watched
      return deliveries
    }
    for deliver in deliveries { deliver(notification) }
  }
}
