import Foundation  // Thread.isMainThread
import Liaison
import LiaisonStore

/// What a view property keeps across its view's updates: the follower of its part, made once the
/// container is known (synchronously on a folder's container, so that the first `body` shows the
/// part as it is; in a task on another), and how to redraw the view. No SwiftUI here: the view
/// properties hold it in a `State`.
@MainActor
final class ViewPart<Follower: ViewFollower> {
  /// What the property shows, once it is open.
  private(set) var follower: Follower?
  /// Why the part could not be opened, if it could not.
  private(set) var openError: LiaisonError?
  /// Opening the part, on a container that cannot open it synchronously.
  private var opening: Task<Void, Never>?
  /// Tells the view to evaluate its `body` again.
  private(set) var redraw: (@MainActor () -> Void)?
  /// Called once, when the follower is made.
  var opened: (@MainActor (Follower) -> Void)?

  nonisolated init() {}

  /// Opens the part in `container`, once (the first container the property sees is the one it
  /// keeps): with `now` on a folder's container, else with `later` in a task.
  ///
  /// - Parameters:
  ///   - what: the part, for the error when there is no container ("the presence 'recording'").
  func open(
    _ what: String, in container: (any CoordinationStore)?, redraw: @escaping @MainActor () -> Void,
    now: (SharedContainer) throws(LiaisonError) -> Follower,
    later: @escaping @MainActor (any CoordinationStore) async throws(LiaisonError) -> Follower
  ) {
    self.redraw = redraw
    guard follower == nil, opening == nil, openError == nil else { return }
    guard let container else {
      openError = LiaisonError(
        .invalidArgument,
        "The view property of \(what) has no container: give one with .liaisonContainer(_:) at the root of the "
          + "view hierarchy, or with the property's container: argument.")
      return
    }
    if let folder = container as? SharedContainer {
      do throws(LiaisonError) {
        adopt(try now(folder))
      } catch {
        openError = error
      }
      return
    }
    opening = Task { [weak self] in
      do throws(LiaisonError) {
        let follower = try await later(container)
        self?.adopt(follower)
      } catch {
        self?.openError = error
      }
      self?.redraw?()
    }
  }

  private func adopt(_ follower: Follower) {
    follower.didChange = { [weak self] in self?.redraw?() }
    self.follower = follower
    opened?(follower)
  }
}

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// What ``SharedPresence``, ``SharedSignal`` and ``SharedInbox`` hold: their part's
/// ``ViewPart`` in a `State`, what redraws the view, and the container (given, or the
/// environment's). A dynamic property of theirs, which SwiftUI updates before them.
///
/// SwiftUI calls `update()` without isolation (`DynamicProperty.update()` is nonisolated), on the
/// main thread when it updates a view: the properties' `update()` are nonisolated too, and hop to
/// the main actor with ``onMainActor(_:)``, not through a `@preconcurrency` conformance, whose
/// executor check on every update has crashed apps (manaflow-ai/cmux#9124).
struct FollowedPart<Follower: ViewFollower>: DynamicProperty {
  @State private var part = ViewPart<Follower>()
  /// What the part changes when the view must show something new: each read of the follower
  /// reads it too, so that the view depends on it.
  @State private var revision = 0
  @Environment(\.liaisonContainer) private var environmentContainer
  private let container: (any CoordinationStore)?

  init(container: (any CoordinationStore)?) { self.container = container }

  /// The follower, once the part is open.
  @MainActor var follower: Follower? {
    _ = revision
    return part.follower
  }

  /// Why the part could not be opened or followed, if it could not.
  @MainActor var error: LiaisonError? {
    _ = revision
    return part.openError ?? part.follower?.error
  }

  /// Opens the part, once (see ``ViewPart/open(_:in:redraw:now:later:)``), on the main actor.
  func open(
    _ what: String, now: @escaping @MainActor @Sendable (SharedContainer) throws(LiaisonError) -> Follower,
    later: @escaping @MainActor @Sendable (any CoordinationStore) async throws(LiaisonError) -> Follower
  ) {
    let (part, revision, container) = (part, $revision, container ?? environmentContainer)
    onMainActor {
      part.open(what, in: container, redraw: { revision.wrappedValue &+= 1 }, now: now, later: later)
    }
  }
}

/// Runs `body` on the main actor: at once on the main thread, where SwiftUI calls `update()`
/// (the main thread is the main actor's, and no executor check runs), else at the main actor's
/// next turn.
func onMainActor(_ body: @escaping @MainActor @Sendable () -> Void) {
  #if canImport(SwiftUI)
    if Thread.isMainThread {
      // A main-actor function and a plain one have the same representation: on the main thread,
      // calling it as a plain one is calling it on the main actor.
      unsafeBitCast(body, to: (@Sendable () -> Void).self)()
    } else {
      Task { @MainActor in body() }
    }
  #else
    // SwiftUI's model calls `update()` on the main actor, which Linux may run on another thread
    // than the process's first: checked, as the model's honesty requires.
    MainActor.assumeIsolated { body() }
  #endif
}
