import Liaison

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// The environment key of the container that Liaison's view properties read from.
private struct LiaisonContainerKey: EnvironmentKey {
  static let defaultValue: (any CoordinationStore)? = nil
}

extension EnvironmentValues {
  /// The container that Liaison's view properties (``SharedValue``) below this point read from,
  /// unless one is given its own: a folder's `SharedContainer` or a `PostgresContainer`.
  public var liaisonContainer: (any CoordinationStore)? {
    get { self[LiaisonContainerKey.self] }
    set { self[LiaisonContainerKey.self] = newValue }
  }
}

extension View {
  /// Gives `container` to every Liaison view property below this view: set it once, at the root
  /// of a scene (or of a widget's or a keyboard's view).
  ///
  /// ```swift
  /// WindowGroup {
  ///   ContentView().liaisonContainer(container)
  /// }
  /// ```
  public func liaisonContainer(_ container: any CoordinationStore) -> some View {
    environment(\.liaisonContainer, container)
  }
}
