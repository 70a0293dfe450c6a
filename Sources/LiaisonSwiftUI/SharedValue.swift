import Liaison
import LiaisonStore

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// One key of a shared defaults domain as a view property: the view shows every process's
/// writes, and writes with `$name`, a `Binding`, like `@AppStorage` — across processes.
///
/// ```swift
/// struct ThemePicker: View {
///   @SharedValue("theme", in: "settings") var theme = "system"
///
///   var body: some View {
///     Picker("Theme", selection: $theme) { … }
///   }
/// }
/// ```
///
/// - **The first frame has the value** on a folder's container: the property reads it
///   synchronously (from the domain's cache) before the view's first `body`. On PostgreSQL, the
///   view shows the declared default until the first read returns.
/// - **Another process's write** shows at the next frame once the property has read it; writes
///   in quick succession come as one update, and a write to another key of the domain redraws
///   nothing.
/// - **A write shows at once** and the store's answer follows: a refused write (over the size
///   limit) goes back to the store's value, with the reason in `_theme.error`. A write that
///   returns after another process's later one never hides it.
/// - The container comes from the environment (`.liaisonContainer(_:)`, once at the
///   root), or is given to the property (`container:`); the first one the property sees is the
///   one it keeps. Without one, the property shows its default and `error` says why.
/// - It needs no Observation: from iOS 16 and macOS 13.
@propertyWrapper
public struct SharedValue<Value: Codable & Sendable>: DynamicProperty {
  @State private var core: SharedValueCore<Value>
  /// What the core changes when the view must show something new: each read of the value reads it
  /// too, so that the view depends on it.
  @State private var revision = 0
  @Environment(\.liaisonContainer) private var environmentContainer
  private let container: (any CoordinationStore)?

  /// A key of `domain`, and the value the view shows while the store has none.
  ///
  /// - Parameters:
  ///   - wrappedValue: what the view shows when the key has no value (or before the first read).
  ///   - key: the key's name (a ``/Liaison/LiaisonName``).
  ///   - domain: the defaults domain it is in.
  ///   - container: the container to read from, in place of the environment's.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz).
  public init(
    wrappedValue: Value, _ key: String, in domain: String, container: (any CoordinationStore)? = nil,
    updateInterval: Duration = .milliseconds(16)
  ) {
    _core = State(
      initialValue: SharedValueCore(
        key: key, domain: domain, defaultValue: wrappedValue, updateInterval: updateInterval))
    self.container = container
  }

  /// The key's value as the store has it (or as this view's writes in flight make it); the
  /// default while it has none. Setting it writes to the store.
  @MainActor public var wrappedValue: Value {
    get {
      _ = revision
      return core.value
    }
    nonmutating set { core.set(newValue) }
  }

  /// A binding to the value, for controls: each change writes to the store. A `body` that passes
  /// it on depends on the value, as one that reads it does.
  @MainActor public var projectedValue: Binding<Value> {
    _ = revision
    let core = core
    return Binding(get: { core.value }, set: { core.set($0) })
  }

  /// Why the property could not open, read or write the key, the last time it failed (a refused
  /// write, no container); `nil` after the next success.
  @MainActor public var error: LiaisonError? {
    _ = revision
    return core.error
  }

  /// Opens the key in the container before the view's first `body` (SwiftUI calls it before
  /// each one), and from then on redraws the view when what it shows changes.
  public func update() {
    let (core, revision, container) = (core, $revision, container ?? environmentContainer)
    onMainActor { core.open(in: container) { revision.wrappedValue &+= 1 } }
  }
}

/// What a ``SharedValue`` keeps across the view's updates: the key's follower, once the container
/// is known, and the writes made before.
@MainActor
final class SharedValueCore<Value: Codable & Sendable> {
  private let key: String
  private let domain: String
  private let defaultValue: Value
  private let updateInterval: Duration
  private let part = ViewPart<DefaultsValueFollower<Value>>()
  /// Values written before the follower existed (a PostgreSQL container still opening), in order:
  /// shown at once, and written once it exists.
  private var pendingWrites: [Value] = []

  nonisolated init(key: String, domain: String, defaultValue: Value, updateInterval: Duration) {
    self.key = key
    self.domain = domain
    self.defaultValue = defaultValue
    self.updateInterval = updateInterval
  }

  var value: Value { pendingWrites.last ?? part.follower?.value ?? defaultValue }
  var error: LiaisonError? { part.openError ?? part.follower?.error }

  func set(_ newValue: Value) {
    guard let follower = part.follower else {
      pendingWrites.append(newValue)
      part.redraw?()
      return
    }
    follower.set(newValue)
  }

  /// Opens the key in `container`, once.
  func open(in container: (any CoordinationStore)?, redraw: @escaping @MainActor () -> Void) {
    if part.opened == nil {
      part.opened = { [weak self] follower in
        for pending in self?.pendingWrites ?? [] { follower.set(pending) }
        self?.pendingWrites = []
      }
    }
    let (key, domain, updateInterval) = (key, domain, updateInterval)
    part.open(
      "the key '\(key)' of '\(domain)'", in: container, redraw: redraw,
      now: { folder throws(LiaisonError) in
        let key = try DefaultsKey<Value>(validating: key)
        let defaults = try folder.defaults(domain)
        return DefaultsValueFollower(key, in: defaults, value: try defaults.get(key), updateInterval: updateInterval)
      },
      later: { container throws(LiaisonError) in
        let key = try DefaultsKey<Value>(validating: key)
        let defaults = try await container.defaults(domain)
        return DefaultsValueFollower(
          key, in: defaults, value: try await defaults.get(key), updateInterval: updateInterval)
      })
  }
}
