import Dispatch

/// The notifications of a ``Signal``, from ``Signal/notifications(ignoringOwnPosts:)``.
///
/// An `AsyncSequence` whose every iterator has a subscription of its own, and so receives every
/// notification (coalesced, as always): the first iterator uses the subscription made when
/// `notifications()` returned, so that a post after that is never missed; a later iterator
/// subscribes when it is made (and, should that fail, ends at once). Each holds at most one
/// undelivered notification (the newest), never ends by itself, and ends its subscription when
/// the consuming task is cancelled, the loop breaks, or it is released.
public struct SignalNotifications: AsyncSequence, Sendable {
  public typealias Element = SignalNotification

  private let signal: Signal
  private let ignoringOwnPosts: Bool
  /// The subscription made with the sequence, for its first iterator.
  private let first: Locked<Feed?>

  init(signal: Signal, ignoringOwnPosts: Bool) throws(LiaisonError) {
    self.signal = signal
    self.ignoringOwnPosts = ignoringOwnPosts
    first = Locked(try Feed(signal: signal, ignoringOwnPosts: ignoringOwnPosts))
  }

  public func makeAsyncIterator() -> AsyncIterator {
    let feed = first.withLock { $0.take() } ?? (try? Feed(signal: signal, ignoringOwnPosts: ignoringOwnPosts))
    return AsyncIterator(base: feed?.stream.makeAsyncIterator(), feed: feed)
  }

  public struct AsyncIterator: AsyncIteratorProtocol {
    var base: AsyncStream<SignalNotification>.Iterator?
    let feed: Feed?

    public mutating func next() async -> SignalNotification? {
      await base?.next()
    }

    // The stream's own `next(isolation:)` is newer than the package's minimum platforms.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public mutating func next(isolation actor: isolated (any Actor)?) async -> SignalNotification? {
      await base?.next(isolation: actor)
    }
  }

  /// One subscription and the stream it feeds.
  final class Feed: Sendable {
    let stream: AsyncStream<SignalNotification>
    private let subscription: Subscription

    init(signal: Signal, ignoringOwnPosts: Bool) throws(LiaisonError) {
      let (stream, continuation) = AsyncStream.makeStream(
        of: SignalNotification.self, bufferingPolicy: .bufferingNewest(1))
      let id = try SignalHub.shared.subscribe(signal.file, ignoringOwnPosts: ignoringOwnPosts) {
        continuation.yield($0)
      }
      let subscription = Subscription(key: signal.file.key, id: id)
      continuation.onTermination = { _ in subscription.cancel() }
      self.stream = stream
      self.subscription = subscription
    }

    deinit { subscription.cancel() }
  }

  /// Ends the watch when cancelled or released.
  final class Subscription: Sendable {
    private let key: FileKey
    private let id: Locked<UInt64>

    init(key: FileKey, id: UInt64) {
      self.key = key
      self.id = Locked(id)
    }

    deinit { cancel() }

    func cancel() {
      let id = id.withLock { id in
        defer { id = 0 }
        return id
      }
      if id != 0 { SignalHub.shared.unsubscribe(key, id: id) }
    }
  }
}

extension Signal {
  /// Calls `handler` on `queue` for each notification, until the returned observation is
  /// cancelled or released: the form for code that is not `async` (UIKit, AppKit, callbacks).
  ///
  /// Notifications coalesce as for ``notifications(ignoringOwnPosts:)``: while a call is pending
  /// on `queue`, further posts only update what it will deliver.
  ///
  /// ```swift
  /// let observation = try signal.observe(on: .main) { note in refresh(note.state) }
  /// // … later, or by releasing it:
  /// observation.cancel()
  /// ```
  public func observe(
    on queue: DispatchQueue, ignoringOwnPosts: Bool = false,
    _ handler: @escaping @Sendable (SignalNotification) -> Void
  ) throws(LiaisonError) -> SignalObservation {
    let pending = Locked<SignalNotification?>(nil)
    let id = try SignalHub.shared.subscribe(file, ignoringOwnPosts: ignoringOwnPosts) { notification in
      let wasIdle = pending.withLock { pending -> Bool in
        defer { pending = notification }
        return pending == nil
      }
      guard wasIdle else { return }
      queue.async {
        if let latest = pending.withLock({ $0.take() }) { handler(latest) }
      }
    }
    return SignalObservation(subscription: .init(key: file.key, id: id))
  }
}

extension Signal {
  /// Calls `handler` on Liaison's event loop for each notification (its thread on Linux, its
  /// serial queue on Apple platforms): the fastest delivery, with one thread wake-up (the event
  /// loop's) where the other forms add a second (a queue's or a task's thread). For a handler that returns at once: set a flag, signal
  /// a semaphore, write a byte to a pipe, `yield` into a stream of your own.
  ///
  /// The handler must not block, wait, or do slow work: while it runs, every other signal,
  /// presence and store watch of this process waits. Calls are serial and never overlap;
  /// notifications coalesce as for ``notifications(ignoringOwnPosts:)``. Cancelling the
  /// observation from inside the handler is allowed.
  ///
  /// ```swift
  /// let wakeUp = DispatchSemaphore(value: 0)
  /// let observation = try signal.observeOnEventLoop { _ in wakeUp.signal() }
  /// ```
  public func observeOnEventLoop(
    ignoringOwnPosts: Bool = false, _ handler: @escaping @Sendable (SignalNotification) -> Void
  ) throws(LiaisonError) -> SignalObservation {
    let id = try SignalHub.shared.subscribe(file, ignoringOwnPosts: ignoringOwnPosts, deliver: handler)
    return SignalObservation(subscription: .init(key: file.key, id: id))
  }
}

/// A running ``Signal/observe(on:ignoringOwnPosts:_:)`` or
/// ``Signal/observeOnEventLoop(ignoringOwnPosts:_:)``: cancel it, or release it, to stop.
public final class SignalObservation: Sendable {
  private let subscription: SignalNotifications.Subscription

  init(subscription: SignalNotifications.Subscription) {
    self.subscription = subscription
  }

  /// Stops the observation. A call already queued may still run once.
  public func cancel() {
    subscription.cancel()
  }
}
