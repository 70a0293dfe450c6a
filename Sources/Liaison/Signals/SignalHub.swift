/// The observers of signals in this process: one event-loop watch per signal file, however many
/// observers it has, and the sequence numbers this process posted (so that observers may ignore
/// their own process's posts exactly, even when notifications coalesce).
final class SignalHub: Sendable {
  static let shared = SignalHub()

  private struct Observer {
    /// The sequence this observer has seen; `nil` until the subscription has read it.
    var lastSequence: UInt64?
    let ignoringOwnPosts: Bool
    let deliver: @Sendable (SignalNotification) -> Void
  }

  private struct Watched {
    let file: SignalFile
    let registration: EventRegistration
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
  /// The file's watch is in place before the current sequence is read, so a post after this
  /// returns is always delivered. The watch is made under the hub's lock, so that a second
  /// subscriber never returns before the first one's watch exists. (The event loop never takes
  /// this lock while it holds its own, so the order is safe.)
  func subscribe(
    _ file: SignalFile, ignoringOwnPosts: Bool, deliver: @escaping @Sendable (SignalNotification) -> Void
  ) throws(LiaisonError) -> UInt64 {
    let key = file.key
    let id = try state.withLock { state throws(LiaisonError) -> UInt64 in
      if state.watched[key] == nil {
        // A post writes the file: an unlock alone (a post's release, on Apple platforms) is no news.
        // The watch outlives the descriptor it was made through (Linux watches the inode; Apple
        // platforms keep a duplicate).
        let registration = try file.withDescriptorKeepingNone { fd throws(LiaisonError) in
          try EventLoop.watch(.file(descriptor: fd, doorbell: file.doorbell)) { events in
            if events.contains(.changed) { SignalHub.shared.fire(key) }
          }
        }
        state.watched[key] = Watched(file: file, registration: registration)
      }
      state.nextID += 1
      state.watched[key]!.observers[state.nextID] = Observer(
        lastSequence: nil, ignoringOwnPosts: ignoringOwnPosts, deliver: deliver)
      return state.nextID
    }
    file.lifecycle.watches.withLock { $0 += 1 }
    do throws(LiaisonError) {
      let sequence = try file.readKeepingNoDescriptor().sequence
      state.withLock { state in
        if state.watched[key]?.observers[id] != nil, state.watched[key]!.observers[id]!.lastSequence == nil {
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
    let (lifecycle, registration) = state.withLock { state -> (ContainerLifecycle?, EventRegistration?) in
      guard let watched = state.watched[key], state.watched[key]!.observers.removeValue(forKey: id) != nil else {
        return (nil, nil)
      }
      guard state.watched[key]!.observers.isEmpty else { return (watched.file.lifecycle, nil) }
      return (watched.file.lifecycle, state.watched.removeValue(forKey: key)?.registration)
    }
    lifecycle?.watches.withLock { $0 -= 1 }
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
  /// seen the current sequence. Sequences only move forward, so an older read that finishes late
  /// never takes an observer back.
  private func fire(_ key: FileKey) {
    guard let file = state.withLock({ $0.watched[key]?.file }) else { return }
    // A corrupt or vanished record wakes nobody; readers of `state` get the error.
    guard let record = try? file.readKeepingNoDescriptor() else { return }
    let notification = SignalNotification(name: file.name, state: record.state, sequence: record.sequence)
    let deliveries = state.withLock { state -> [@Sendable (SignalNotification) -> Void] in
      // Taken out and put back, and walked by index: a copy of the entry, or an iterator, would
      // share the observers' storage, and the first change would then copy it whole.
      guard var watched = state.watched.removeValue(forKey: key) else { return [] }
      defer { state.watched[key] = watched }
      var deliveries: [@Sendable (SignalNotification) -> Void] = []
      var index = watched.observers.startIndex
      while index != watched.observers.endIndex {
        defer { watched.observers.formIndex(after: &index) }
        let observer = watched.observers.values[index]
        guard let last = observer.lastSequence, record.sequence > last else { continue }
        let onlyOwn =
          observer.ignoringOwnPosts
          && UInt64(watched.ownPosts.count { $0 > last && $0 <= record.sequence }) == record.sequence - last
        if !onlyOwn { deliveries.append(observer.deliver) }
        watched.observers.values[index].lastSequence = record.sequence
      }
      if !watched.ownPosts.isEmpty {
        let oldest = watched.observers.values.compactMap(\.lastSequence).min() ?? record.sequence
        watched.ownPosts = watched.ownPosts.filter { $0 > oldest }
      }
      return deliveries
    }
    for deliver in deliveries { deliver(notification) }
  }
}
