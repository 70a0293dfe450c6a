import Foundation
import Liaison
import LiaisonTestSupport
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models
import Testing

@testable import LiaisonStore

/// A shared value's model on a folder, in every build (no trait): what it shows while its own
/// writes are in flight, after another process's, and after a write the store refuses.
@Suite("ObservedValue on a folder")
@MainActor struct ObservedValueTests {
  let directory = TemporaryDirectory()
  let volume = DefaultsKey<Int>("volume")

  /// Another process's 500 writes to another key of the domain change nothing the model shows:
  /// its value is set once, for the write to its own key that comes after them.
  @Test(.enabled(if: modelsExist))
  func writesToOtherKeysOfTheDomainLeaveTheValueAlone() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    try await defaults.set(3, for: volume)
    let model = try await ObservedValue(volume, in: defaults, updateInterval: .zero)
    let writer = try Peer(container: directory.path)
    #expect(try writer.send(.dincrement, "settings", "other", "500", timeout: 600) == "done")
    try writer.send(.dset, "settings", "volume", "7")
    try await until("the model shows the peer's volume", observing: { model.value }, satisfies: { $0 == 7 })
    #expect(model.updateCount == 1, "\(model.updateCount) updates of the value for one change of it")
  }

  /// A write shows at once, before the store has it; one the store refuses (over the size
  /// limit) goes back to the store's value, with the refusal in `error`.
  @Test(.enabled(if: modelsExist))
  func aWriteShowsAtOnceAndARefusedOneGoesBack() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    let theme = try await ObservedValue(DefaultsKey<String>("theme"), in: defaults)
    let write = theme.set("dark")
    #expect(theme.value == "dark", "shown before the store answered")
    try await write.value
    #expect(theme.value == "dark" && theme.error == nil)
    #expect(try defaults.get(DefaultsKey<String>("theme")) == "dark")

    let huge = String(repeating: "x", count: 2 << 20)
    let refused = theme.set(huge)
    #expect(theme.value?.count == huge.count)  // (the count: a failure would print 2 MiB)
    let error = await #expect(throws: LiaisonError.self) { try await refused.value }
    #expect(error?.code == .tooLarge)
    #expect(theme.value == "dark", "back to the store's value")
    #expect(theme.error?.code == .tooLarge)
  }

  /// Another process writes after this model's write reached the store, before the write's
  /// task is done: the model ends on the other process's value, not on its own older one. The
  /// main thread is held (synchronously) across the other write, so the model's task cannot show
  /// anything in between.
  @Test(.enabled(if: modelsExist))
  func anEarlierWriteNeverHidesALaterOneOfAnotherProcess() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    let writer = try Peer(container: directory.path)
    let model = try await ObservedValue(volume, in: defaults)
    let reader = try await SharedContainer(directory: directory.path).defaults("settings")
    // No suspension from here to the await of the write: the main actor stays held.
    let write = model.set(1)
    try waitUntil("the model's write is stored") { try reader.get(volume) == 1 }
    try writer.send(.dset, "settings", "volume", "2")
    try await write.value
    #expect(model.value == 2, "the later write of another process")
    try await until("the model shows 2", observing: { model.value }, satisfies: { $0 == 2 })
  }

  /// `update`'s transform runs off the main actor, while the store holds the domain's write
  /// lock; a `set` after it waits for it.
  @Test(.enabled(if: modelsExist))
  func anUpdateRunsOffTheMainActorAndWritesInOrder() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    let model = try await ObservedValue(volume, in: defaults)
    let onMainThread = Locked<Bool?>(nil)
    let updated = try await model.update { old in
      onMainThread.withLock { $0 = Thread.isMainThread }
      return (old ?? 0) + 1
    }
    #expect(updated == 1 && model.value == 1)
    #expect(onMainThread.withLock { $0 } == false)
    model.set(5)
    async let second = model.update { ($0 ?? 0) * 10 }
    #expect(try await second == 50, "the update came after the set before it")
    #expect(model.value == 50)
  }
}
