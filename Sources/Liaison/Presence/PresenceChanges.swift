/// A change of a ``Presence``, from ``Presence/changes()``.
public enum PresenceChange: Sendable, Hashable {
  /// Claimed, or leased, by this holder.
  case claimed(PresenceHolder)
  /// Not held any more: released, lapsed, or its holder died.
  case released
}

extension Presence {
  /// The presence's state now, then every change of it, as an `AsyncSequence`.
  ///
  /// ```swift
  /// for try await change in try container.presence("recording").changes() {
  ///   switch change {
  ///   case .claimed(let holder): showBadge(holder.info)
  ///   case .released: hideBadge()
  ///   }
  /// }
  /// ```
  ///
  /// A holder that dies without a word is reported as ``PresenceChange/released`` as soon as the
  /// kernel has released its claim: Liaison watches the holder's process (with `pidfd_open` on
  /// Linux, a Dispatch process source on Apple platforms), so nothing depends on the dead process
  /// posting anything. A lease is reported released when it lapses; its renewals are not changes.
  /// Changes in quick succession may coalesce into the latest; consecutive elements always differ.
  /// While a claim is in progress (locked, its record not written yet) nothing is yielded: its
  /// record, once written, is the next element. The event loop's thread never waits for it.
  ///
  /// Each iterator has a watch of its own and sees every change: the first uses the watch made
  /// when this returns, later ones start theirs when they are made. Iteration throws the
  /// ``LiaisonError`` that ended it (the presence's file could no longer be read or watched).
  /// Ending the iteration, or releasing the sequence and its iterators, ends the watch.
  public func changes() throws(LiaisonError) -> PresenceChanges {
    try PresenceChanges(presence: self)
  }
}

/// The changes of a ``Presence``: see ``Presence/changes()``.
public struct PresenceChanges: AsyncSequence, Sendable {
  public typealias Element = PresenceChange

  private let presence: Presence
  /// The watch made when the sequence was, for its first iterator.
  private let first: Locked<Feed?>

  init(presence: Presence) throws(LiaisonError) {
    self.presence = presence
    first = Locked(try Feed(presence: presence))
  }

  public func makeAsyncIterator() -> AsyncIterator {
    if let feed = first.withLock({ $0.take() }) { return AsyncIterator(feed: .success(feed)) }
    do throws(LiaisonError) {
      return AsyncIterator(feed: .success(try Feed(presence: presence)))
    } catch {
      return AsyncIterator(feed: .failure(error))
    }
  }

  public struct AsyncIterator: AsyncIteratorProtocol {
    private let feed: Feed?
    private var base: AsyncThrowingStream<PresenceChange, any Error>.Iterator?
    private var failure: LiaisonError?
    private var lastDelivered: PresenceChange?

    fileprivate init(feed: Result<Feed, LiaisonError>) {
      switch feed {
      case .success(let feed):
        self.feed = feed
        base = feed.stream.makeAsyncIterator()
      case .failure(let error):
        self.feed = nil
        failure = error
      }
    }

    /// The next change; `nil` when the iteration is cancelled.
    ///
    /// - Throws: the ``LiaisonError`` that ended the watch.
    public mutating func next() async throws(LiaisonError) -> PresenceChange? {
      if let failure = failure.take() { throw failure }
      while let change = try await nextFromWatch() {
        // Against the last element delivered, not the last emitted: a change and its undoing
        // while the consumer was away must not reach it as a repeat.
        if let lastDelivered, change.isSame(as: lastDelivered) { continue }
        lastDelivered = change
        return change
      }
      return nil
    }

    /// The watch's next change; the stream ends with a ``LiaisonError`` (its `fail`), or with none.
    private mutating func nextFromWatch() async throws(LiaisonError) -> PresenceChange? {
      do {
        return try await base?.next()
      } catch let error as LiaisonError {
        throw error
      } catch {
        return nil
      }
    }
  }

  /// One watch and the stream it feeds.
  fileprivate final class Feed: Sendable {
    let stream: AsyncThrowingStream<PresenceChange, any Error>
    private let continuation: AsyncThrowingStream<PresenceChange, any Error>.Continuation

    init(presence: Presence) throws(LiaisonError) {
      let (stream, continuation) = AsyncThrowingStream.makeStream(
        of: PresenceChange.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
      let watch = try PresenceWatch(
        presence: presence, emit: { continuation.yield($0) }, fail: { continuation.finish(throwing: $0) })
      continuation.onTermination = { _ in watch.cancel() }
      self.stream = stream
      self.continuation = continuation
    }

    /// Finishing ends the watch (through `onTermination`) and lets the stream release it.
    deinit { continuation.finish() }
  }
}

extension PresenceChange {
  /// Whether two changes say the same: a lease's renewal (a new expiry) is no change.
  func isSame(as other: PresenceChange) -> Bool {
    switch (self, other) {
    case (.released, .released):
      return true
    case (.claimed(let a), .claimed(let b)):
      return a.kind == b.kind && a.processID == b.processID && a.since == b.since && a.info == b.info
        && a.leaseToken == b.leaseToken
    default:
      return false
    }
  }
}

/// Watches one presence on the event loop: its file (claims, releases, lease renewals), its
/// claimant's process (death), and its lease's expiry.
final class PresenceWatch: Sendable {
  private struct State {
    var fileWatch: EventRegistration?
    var processWatch: (pid: Int32, registration: EventRegistration)?
    /// A claimant whose exit the process watch reported while a look still found its claim held:
    /// a zombie, judged by its process while the container is suspended (see `Presence.look`).
    /// Nothing reports its reap, so it is looked at again every second instead.
    var exitedPID: Int32?
    var expiryWatch: EventRegistration?
    var last: PresenceChange?
    /// Whether the last look found the file locked exclusively. Until then, an unlock alone
    /// changes nothing that can be seen: see ``fileChanged(_:)``.
    var heldExclusively = true
    var cancelled = false
  }

  private let presence: Presence
  private let emit: @Sendable (PresenceChange) -> Void
  private let fail: @Sendable (LiaisonError) -> Void
  private let state = Locked(State())
  /// Held for a whole evaluation, so that two (at subscription, and on the loop) never
  /// interleave and an older reading never lands after a newer one. It is never held while
  /// registrations are cancelled, and the loop calls evaluations without holding its own lock.
  private let evaluation = Locked(())

  /// Watches `presence`, calling `emit` with its state now and at each change, and `fail` once
  /// with the error that ends the watch (after a failure at subscription, `init` throws instead).
  init(
    presence: Presence, emit: @escaping @Sendable (PresenceChange) -> Void,
    fail: @escaping @Sendable (LiaisonError) -> Void
  ) throws(LiaisonError) {
    self.presence = presence
    self.emit = emit
    self.fail = fail
    // Open only to register the watch: the event loop keeps what it needs (Linux: an inotify
    // watch of the inode; Apple platforms: one descriptor per file, whatever the watches on it).
    let fd = try presence.openFile()
    do throws(LiaisonError) {
      let registration: EventRegistration
      do throws(LiaisonError) {
        registration = try EventLoop.watch(
          .file(descriptor: fd, doorbell: presence.doorbell)
        ) { [weak self] events in self?.fileChanged(events) }
        Syscall.close(fd)
      } catch {
        Syscall.close(fd)
        throw error
      }
      state.withLock { $0.fileWatch = registration }
      presence.container.lifecycle.watches.withLock { $0 += 1 }
      try evaluateOrThrow()
    } catch {
      cancel()
      throw error
    }
  }

  deinit { cancel() }

  /// Ends every watch. Registrations are cancelled outside the lock: cancelling the event loop's
  /// last one joins its thread, which may be waiting for this lock in `evaluate`.
  func cancel() {
    let registrations = state.withLock { state -> [EventRegistration] in
      state.cancelled = true
      if state.fileWatch != nil { presence.container.lifecycle.watches.withLock { $0 -= 1 } }
      let registrations = [state.fileWatch, state.processWatch?.registration, state.expiryWatch].compactMap { $0 }
      state.fileWatch = nil
      state.processWatch = nil
      state.expiryWatch = nil
      return registrations
    }
    for registration in registrations { registration.cancel() }
  }

  /// Runs on the event loop's thread for an event of the presence's file.
  ///
  /// On Apple platforms every release of a `flock` on the file is an event (`NOTE_FUNLOCK`), a
  /// lease renewal's, a claimant's and a look's brief lock included (a look at a claim's record
  /// takes the lock shared for a moment there). An unlock alone is
  /// news only when the last look judged the presence held by a claim: then it may be the
  /// holder's release or death (its close). Otherwise, what can make it held again is a claim or
  /// lease, and their records are writes, which are changes: the unlock is the echo of a brief
  /// holder, and is ignored. So the looks are bounded by the events that really happened.
  private func fileChanged(_ events: WatchEvents) {
    if events == .unlocked, !state.withLock({ $0.heldExclusively }) { return }
    evaluate()
  }

  /// Runs on the event loop's thread: reads the file once, never waits. An error ends the watch
  /// and reaches the consumer.
  private func evaluate() {
    do throws(LiaisonError) {
      try evaluateOrThrow()
    } catch {
      let wasLive = state.withLock { !$0.cancelled }
      cancel()
      if wasLive { fail(error) }
    }
  }

  /// Runs on the event loop's thread when the claimant `pid` has exited: the process watch
  /// fires once, so a claim still found held afterwards (a zombie's, see ``State/exitedPID``) is
  /// looked at again by the clock.
  private func processExited(_ pid: Int32) {
    // Only while suspended is a claim judged by its process, which a zombie's fools: otherwise the
    // look takes the lock, and the holder's release is an event of its own.
    let suspended = presence.container.isSuspended
    let fired = state.withLock { state -> EventRegistration? in
      guard suspended, state.processWatch?.pid == pid else { return nil }
      state.exitedPID = pid
      return state.processWatch.take()?.registration
    }
    fired?.cancel()
    evaluate()
  }

  /// Reads the holder, emits it if it changed, and re-arms the process and expiry watches.
  private func evaluateOrThrow() throws(LiaisonError) {
    let toCancel = try evaluation.withLock { _ throws(LiaisonError) in try evaluateSerially() }
    for registration in toCancel { registration.cancel() }
  }

  /// One evaluation; returns the registrations it replaced, for cancelling after the lock.
  private func evaluateSerially() throws(LiaisonError) -> [EventRegistration] {
    let suspended = presence.container.isSuspended
    let look = try presence.look()
    state.withLock { $0.heldExclusively = look.heldExclusively }
    guard case .known(let holder) = look.probe else {
      // Being written: the writer's write, or its close, changes the file and brings the loop
      // back here. The last state stands meanwhile.
      return []
    }
    let change: PresenceChange = holder.map { .claimed($0) } ?? .released
    var toCancel: [EventRegistration] = []
    var watchPID: Int32?
    var watchExpiry: UInt64?
    let shouldEmit = state.withLock { state -> Bool in
      guard !state.cancelled else { return false }
      let claimPID = holder?.kind == .claim ? holder?.processID : nil
      if state.exitedPID != claimPID || !suspended { state.exitedPID = nil }
      if state.processWatch?.pid != claimPID, state.exitedPID == nil {
        if let old = state.processWatch { toCancel.append(old.registration) }
        state.processWatch = nil
        watchPID = claimPID
      }
      if let old = state.expiryWatch { toCancel.append(old) }
      state.expiryWatch = nil
      watchExpiry = holder?.leaseExpiry
      // The kernel's clock: a look again in 1 s, kept by the event loop's poll timeout.
      if state.exitedPID != nil { watchExpiry = SystemClock.bootNanoseconds() + 1_000_000_000 }
      guard let last = state.last, last.isSame(as: change) else {
        state.last = change
        return true
      }
      return false
    }
    if let pid = watchPID {
      let registration = try EventLoop.watch(.processExit(pid)) { [weak self] _ in self?.processExited(pid) }
      state.withLock { state in
        if !state.cancelled { state.processWatch = (pid, registration) }
      }
    }
    if let expiry = watchExpiry {
      let (after, overflow) = expiry.addingReportingOverflow(1_000_000)
      let registration = try EventLoop.watch(.deadline(overflow ? .max : after)) { [weak self] _ in
        self?.evaluate()
      }
      state.withLock { state in
        if !state.cancelled { state.expiryWatch = registration }
      }
    }
    if shouldEmit { emit(change) }
    return toCancel
  }
}

extension Presence {
  /// The `notify(3)` name that writers of this presence's file ring on Apple platforms.
  var doorbell: String { container.presenceFolder.doorbell(for: "presence." + name.rawValue) }
}
