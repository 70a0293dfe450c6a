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
  /// for await change in try container.presence("recording").changes() {
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
  /// posting anything. A lease is reported released when it lapses. Changes in quick succession may
  /// coalesce into the latest; consecutive elements always differ. Ending the iteration, or
  /// releasing the sequence, ends the watch.
  public func changes() throws(LiaisonError) -> PresenceChanges {
    try PresenceChanges(presence: self)
  }
}

/// The changes of a ``Presence``: see ``Presence/changes()``.
public struct PresenceChanges: AsyncSequence, Sendable {
  public typealias Element = PresenceChange

  private let stream: AsyncStream<PresenceChange>
  private let watch: PresenceWatch

  init(presence: Presence) throws(LiaisonError) {
    let (stream, continuation) = AsyncStream.makeStream(
      of: PresenceChange.self, bufferingPolicy: .bufferingNewest(1))
    let watch = try PresenceWatch(presence: presence) { continuation.yield($0) }
    continuation.onTermination = { _ in watch.cancel() }
    self.stream = stream
    self.watch = watch
  }

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(base: stream.makeAsyncIterator(), watch: watch)
  }

  public struct AsyncIterator: AsyncIteratorProtocol {
    var base: AsyncStream<PresenceChange>.Iterator
    let watch: PresenceWatch

    public mutating func next() async -> PresenceChange? {
      await base.next()
    }

    // The stream's own `next(isolation:)` is newer than the package's minimum platforms.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public mutating func next(isolation actor: isolated (any Actor)?) async -> PresenceChange? {
      await base.next(isolation: actor)
    }
  }
}

/// Watches one presence on the event loop: its file (claims, releases, lease renewals), its
/// claimant's process (death), and its lease's expiry.
final class PresenceWatch: Sendable {
  private struct State {
    var descriptor: CInt?
    var fileWatch: EventRegistration?
    var processWatch: (pid: Int32, registration: EventRegistration)?
    var expiryWatch: EventRegistration?
    var last: PresenceChange?
    var cancelled = false
  }

  private let presence: Presence
  private let emit: @Sendable (PresenceChange) -> Void
  private let state = Locked(State())
  /// Held for a whole evaluation, so that two (at subscription, and on the loop) never
  /// interleave and an older reading never lands after a newer one. It is never held while
  /// registrations are cancelled, and the loop calls evaluations without holding its own lock.
  private let evaluation = Locked(())

  init(presence: Presence, emit: @escaping @Sendable (PresenceChange) -> Void) throws(LiaisonError) {
    self.presence = presence
    self.emit = emit
    let fd = try presence.openFile()
    state.withLock { $0.descriptor = fd }
    do throws(LiaisonError) {
      let registration = try EventLoop.watch(
        .file(descriptor: fd, doorbell: presence.doorbell)
      ) { [weak self] in self?.evaluate() }
      state.withLock { $0.fileWatch = registration }
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
    let (registrations, fd) = state.withLock { state -> ([EventRegistration], CInt?) in
      state.cancelled = true
      let registrations = [state.fileWatch, state.processWatch?.registration, state.expiryWatch].compactMap { $0 }
      state.fileWatch = nil
      state.processWatch = nil
      state.expiryWatch = nil
      return (registrations, state.descriptor.take())
    }
    for registration in registrations { registration.cancel() }
    if let fd { Syscall.close(fd) }
  }

  private func evaluate() {
    try? evaluateOrThrow()
  }

  /// Reads the holder, emits it if it changed, and re-arms the process and expiry watches.
  private func evaluateOrThrow() throws(LiaisonError) {
    let toCancel = try evaluation.withLock { _ throws(LiaisonError) in try evaluateSerially() }
    for registration in toCancel { registration.cancel() }
  }

  /// One evaluation; returns the registrations it replaced, for cancelling after the lock.
  private func evaluateSerially() throws(LiaisonError) -> [EventRegistration] {
    let holder = try presence.holder
    let change: PresenceChange = holder.map { .claimed($0) } ?? .released
    var toCancel: [EventRegistration] = []
    var watchPID: Int32?
    var watchExpiry: UInt64?
    let shouldEmit = state.withLock { state -> Bool in
      guard !state.cancelled else { return false }
      let claimPID = holder?.kind == .claim ? holder?.processID : nil
      if state.processWatch?.pid != claimPID {
        if let old = state.processWatch { toCancel.append(old.registration) }
        state.processWatch = nil
        watchPID = claimPID
      }
      if let old = state.expiryWatch { toCancel.append(old) }
      state.expiryWatch = nil
      watchExpiry = holder?.leaseExpiry
      defer { state.last = change }
      return state.last != change
    }
    if let pid = watchPID {
      let registration = try EventLoop.watch(.processExit(pid)) { [weak self] in self?.evaluate() }
      state.withLock { state in
        if !state.cancelled { state.processWatch = (pid, registration) }
      }
    }
    if let expiry = watchExpiry {
      let (after, overflow) = expiry.addingReportingOverflow(1_000_000)
      let registration = try EventLoop.watch(.deadline(overflow ? .max : after)) { [weak self] in self?.evaluate() }
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
