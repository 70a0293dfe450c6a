// A model of the few SwiftUI declarations that LiaisonSwiftUI uses, for Linux, where SwiftUI does
// not exist: it lets the view properties compile here and run in tests, through the same update
// cycle a view goes through. Each declaration follows Apple's documentation of the real one (the
// signature LiaisonSwiftUI calls), and each behaviour below is one SwiftUI has:
//
// - SwiftUI calls every dynamic property's `update()` before it evaluates a view's `body`, nested
//   properties (a `State` inside a property) first (DynamicProperty/update()).
// - A `State`'s storage is made once, when the view is first installed, and kept: a change to it
//   invalidates the view, if its last `body` read it, and the view's `body` runs again on a later
//   turn of the main actor, once for any number of changes in between.
// - An `Environment` property reads the values that the modifiers above the view set
//   (`View.environment(_:_:)`), or its key's default value.
//
// What it leaves out: layout, drawing, animations and transactions; views below the hosted one
// (`ViewHost` evaluates one view's `body` and does not render what it returns); a view re-created
// by its parent (the host keeps the view value it was given, as SwiftUI keeps a view's state across
// re-creations); `update()` runs on a copy of the property, so a property must keep its state in
// `State` (as SwiftUI's documentation asks), not in its own stored fields. On Apple platforms
// LiaisonSwiftUI imports the real SwiftUI and never this module.

/// A view: in this model, something whose `body` the host evaluates.
@MainActor @preconcurrency
public protocol View {
  associatedtype Body: View
  @MainActor var body: Body { get }
}

extension Never: View {
  public var body: Never { fatalError("Never has no body") }
}

/// A view that shows a string: what the tests' views return from `body`.
public struct Text: View, Equatable {
  public let content: String
  public init(_ content: String) { self.content = content }
  public var body: Never { fatalError("Text has no body") }
}

/// A stored variable that updates an external property of a view.
public protocol DynamicProperty {
  mutating func update()
}

extension DynamicProperty {
  public mutating func update() {}
}

/// The storage of one `State`, made when the property is made and kept by the view value the host
/// holds.
final class StateStorage<Value>: @unchecked Sendable {
  var value: Value
  /// Whether the view's last `body` read the value: only then does a change invalidate the view.
  var readInBody = false
  /// Tells the host that the view must be evaluated again; set when the host installs the view.
  var invalidate: (@MainActor () -> Void)?

  init(_ value: Value) { self.value = value }
}

/// What the host finds in a view's fields (by reflection, as SwiftUI finds its dynamic properties).
@MainActor protocol HostedState {
  func install(invalidate: @escaping @MainActor () -> Void)
}

@MainActor protocol HostedEnvironment {
  func install(_ values: EnvironmentValues)
}

/// A property wrapper type that can read and write a value managed by SwiftUI.
@propertyWrapper
public struct State<Value>: DynamicProperty {
  let storage: StateStorage<Value>

  public init(wrappedValue value: Value) { storage = StateStorage(value) }
  public init(initialValue value: Value) { storage = StateStorage(value) }

  public var wrappedValue: Value {
    get {
      if ViewHost.rendering { storage.readInBody = true }
      return storage.value
    }
    nonmutating set {
      storage.value = newValue
      guard storage.readInBody, let invalidate = storage.invalidate else { return }
      MainActor.assumeIsolated { invalidate() }
    }
  }

  public var projectedValue: Binding<Value> {
    let storage = storage
    return Binding(get: { State(storage).wrappedValue }, set: { State(storage).wrappedValue = $0 })
  }

  init(_ storage: StateStorage<Value>) { self.storage = storage }
}

extension State: HostedState {
  func install(invalidate: @escaping @MainActor () -> Void) { storage.invalidate = invalidate }
}

/// A property wrapper type that can read and write a value owned by a source of truth.
///
/// SwiftUI's `init(get:set:)` takes `@isolated(any) @Sendable` closures; the model takes
/// main-actor ones, the only kind LiaisonSwiftUI passes (a main-actor closure is one of those).
@propertyWrapper @dynamicMemberLookup
public struct Binding<Value> {
  private let get: @MainActor @Sendable () -> Value
  private let set: @MainActor @Sendable (Value) -> Void

  public init(get: @escaping @MainActor @Sendable () -> Value, set: @escaping @MainActor @Sendable (Value) -> Void) {
    self.get = get
    self.set = set
  }

  @MainActor public var wrappedValue: Value {
    get { get() }
    nonmutating set { set(newValue) }
  }

  public var projectedValue: Binding<Value> { self }

  @MainActor public subscript<Subject>(dynamicMember keyPath: WritableKeyPath<Value, Subject>) -> Binding<Subject> {
    let (get, set) = (get, set)
    nonisolated(unsafe) let keyPath = keyPath
    return Binding<Subject>(
      get: { get()[keyPath: keyPath] },
      set: { newValue in
        var value = get()
        value[keyPath: keyPath] = newValue
        set(value)
      })
  }
}

/// A binding is `Sendable` when its value is, as SwiftUI's is.
extension Binding: Sendable where Value: Sendable {}

/// A key for accessing values in the environment.
public protocol EnvironmentKey {
  associatedtype Value
  static var defaultValue: Value { get }
}

/// A collection of environment values propagated through a view hierarchy.
public struct EnvironmentValues {
  private var values: [ObjectIdentifier: Any] = [:]

  public init() {}

  public subscript<K: EnvironmentKey>(key: K.Type) -> K.Value {
    get { values[ObjectIdentifier(key)].map { $0 as! K.Value } ?? K.defaultValue }
    set { values[ObjectIdentifier(key)] = newValue }
  }
}

/// The environment's values for one property, set by the host before `update()`.
final class EnvironmentStorage: @unchecked Sendable {
  var values = EnvironmentValues()
}

/// A property wrapper that reads a value from a view's environment.
@propertyWrapper
public struct Environment<Value>: DynamicProperty {
  private let keyPath: KeyPath<EnvironmentValues, Value>
  let storage = EnvironmentStorage()

  public init(_ keyPath: KeyPath<EnvironmentValues, Value>) { self.keyPath = keyPath }

  public var wrappedValue: Value { storage.values[keyPath: keyPath] }
}

extension Environment: HostedEnvironment {
  func install(_ values: EnvironmentValues) { storage.values = values }
}

/// A view with a value of its environment set (what `environment(_:_:)` returns).
public struct EnvironmentWriter<Content: View, Value>: View {
  let content: Content
  let keyPath: WritableKeyPath<EnvironmentValues, Value>
  let value: Value

  public var body: Content { content }
}

/// What the host needs of an `EnvironmentWriter`, whatever its type parameters.
@MainActor protocol WritesEnvironment {
  func write(into values: inout EnvironmentValues)
  var written: any View { get }
}

extension EnvironmentWriter: WritesEnvironment {
  func write(into values: inout EnvironmentValues) { values[keyPath: keyPath] = value }
  var written: any View { content }
}

extension View {
  /// Sets the environment value of the specified key path to the given value.
  public func environment<V>(_ keyPath: WritableKeyPath<EnvironmentValues, V>, _ value: V) -> some View {
    EnvironmentWriter(content: self, keyPath: keyPath, value: value)
  }
}

/// Hosts one view as SwiftUI does: installs its state and environment, updates its dynamic
/// properties, evaluates its `body`, and evaluates it again on a later turn of the main actor
/// after a state its last `body` read has changed.
@MainActor
public final class ViewHost {
  /// Whether a `body` is being evaluated now (what a `State` reads to know it is read by one).
  nonisolated(unsafe) static var rendering = false

  private let view: any View
  private var environment = EnvironmentValues()
  private var scheduled = false
  private var waiters: [(after: Int, continuation: CheckedContinuation<Void, Never>)] = []
  /// How many times the view's `body` has been evaluated.
  public private(set) var evaluations = 0
  /// What the last `body` returned.
  public private(set) var body: Any?

  /// Hosts `root` (a view, or a view under environment modifiers) and evaluates its `body` once,
  /// as SwiftUI does when the view first appears.
  public init(_ root: some View) {
    var view: any View = root
    while let writer = view as? any WritesEnvironment {
      writer.write(into: &environment)
      view = writer.written
    }
    self.view = view
    install(view)
    evaluate()
  }

  /// Waits until `body` has been evaluated more than `count` times in all.
  public func waitForEvaluation(after count: Int) async {
    guard evaluations <= count else { return }
    await withCheckedContinuation { waiters.append((count, $0)) }
  }

  private func install(_ value: Any) {
    for child in Mirror(reflecting: value).children {
      if let state = child.value as? any HostedState {
        state.install { [weak self] in self?.invalidate() }
      } else if let environment = child.value as? any HostedEnvironment {
        environment.install(self.environment)
      } else if child.value is any DynamicProperty {
        install(child.value)
      }
    }
  }

  private func updateProperties(of value: Any) {
    for child in Mirror(reflecting: value).children {
      guard var property = child.value as? any DynamicProperty else { continue }
      updateProperties(of: property)
      property.update()
    }
  }

  private func invalidate() {
    guard !scheduled else { return }
    scheduled = true
    Task { @MainActor in
      self.scheduled = false
      self.evaluate()
    }
  }

  private func evaluate() {
    resetReads(view)
    updateProperties(of: view)
    Self.rendering = true
    body = view.body
    Self.rendering = false
    evaluations += 1
    let ready = waiters.filter { $0.after < evaluations }
    waiters.removeAll { $0.after < evaluations }
    for waiter in ready { waiter.continuation.resume() }
  }

  private func resetReads(_ value: Any) {
    for child in Mirror(reflecting: value).children {
      if let state = child.value as? any ReadTracking {
        state.resetRead()
      } else if child.value is any DynamicProperty {
        resetReads(child.value)
      }
    }
  }
}

/// A `State`'s record of being read by the last `body`, which each evaluation starts afresh.
protocol ReadTracking {
  func resetRead()
}

extension State: ReadTracking {
  func resetRead() { storage.readInBody = false }
}
