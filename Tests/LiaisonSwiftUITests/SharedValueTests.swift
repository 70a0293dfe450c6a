import Foundation
import Liaison
import LiaisonStore
import LiaisonSwiftUI
import LiaisonTestSupport
import Testing

// SwiftUI's model hosts the views (on Linux only: a Mac builds LiaisonSwiftUI against SwiftUI,
// where these tests do not compile).
#if canImport(SwiftUIModel)
  import SwiftUIModel

  /// A view that shows one shared value, as an app would write it.
  struct VolumeView: View {
    @SharedValue("volume", in: "settings") var volume = 0

    var body: Text { Text("\(volume)") }

    /// What a control's action does.
    func choose(_ newVolume: Int) { volume = newVolume }
  }

  struct ThemeView: View {
    @SharedValue("theme", in: "settings") var theme = "system"

    var body: Text { Text(theme) }

    var error: LiaisonError? { _theme.error }
    var binding: Binding<String> { $theme }
  }

  /// A view that only passes the binding on, as one with a `Picker(selection: $volume)` does.
  struct VolumeControl: View {
    @SharedValue("volume", in: "settings") var volume = 0

    var body: Text {
      let selection = $volume
      return Text("\(selection.wrappedValue)")
    }
  }

  /// The view property `SharedValue`, in a view hosted as SwiftUI hosts it (on Linux, SwiftUI's
  /// model), on a folder, against another process's writes.
  @Suite("SharedValue in a view")
  @MainActor struct SharedValueTests {
    let directory = TemporaryDirectory()
    let volume = DefaultsKey<Int>("volume")

    /// The view's first `body` shows the stored value, with no asynchronous step between the
    /// view's creation and its first evaluation.
    @Test func theFirstBodyShowsTheStoredValue() async throws {
      let container = try SharedContainer(directory: directory.path)
      try await container.defaults("settings").set(7, for: volume)
      let host = ViewHost(VolumeView().liaisonContainer(container))
      #expect(host.evaluations == 1)
      #expect(host.body as? Text == Text("7"))
    }

    /// Another process's write redraws the view, which then shows it.
    @Test func anotherProcesssWriteRedrawsTheView() async throws {
      let container = try SharedContainer(directory: directory.path)
      let host = ViewHost(VolumeView().liaisonContainer(container))
      #expect(host.body as? Text == Text("0"), "the default while the store has no value")
      let writer = try Peer(container: directory.path)
      try writer.send(.dset, "settings", "volume", "5")
      try await evaluations(of: host, until: Text("5"))
    }

    /// A view whose `body` only passes `$volume` on (to a control) is redrawn by another
    /// process's write too: reading the binding in `body` makes the view depend on the value.
    @Test func aViewThatPassesTheBindingOnIsRedrawn() async throws {
      let container = try SharedContainer(directory: directory.path)
      let host = ViewHost(VolumeControl().liaisonContainer(container))
      #expect(host.body as? Text == Text("0"))
      let writer = try Peer(container: directory.path)
      try writer.send(.dset, "settings", "volume", "5")
      try await evaluations(of: host, until: Text("5"))
    }

    /// Another process's 1,000 writes to another key of the domain redraw the view 0 times; its
    /// 1,000 writes to this key, a handful of times, the last showing the last value.
    @Test func writesToOtherKeysRedrawNothingAndABurstIsAFewRedraws() async throws {
      let container = try SharedContainer(directory: directory.path)
      let host = ViewHost(VolumeView().liaisonContainer(container))
      let writer = try Peer(container: directory.path)
      #expect(try writer.send(.dincrement, "settings", "other", "1000", timeout: 600) == "done")
      try writer.send(.dset, "settings", "volume", "-1")
      try await evaluations(of: host, until: Text("-1"))
      #expect(host.evaluations == 2, "\(host.evaluations - 2) redraws for 1,000 writes to another key")

      let before = host.evaluations
      #expect(try writer.send(.dincrement, "settings", "volume", "1001", timeout: 600) == "done")
      try await evaluations(of: host, until: Text("1000"))
      let redraws = host.evaluations - before
      print("1,000 writes by another process to the key: \(redraws) redraws")
      #expect(redraws >= 1 && redraws < 100, "\(redraws) redraws for a burst of 1,000 writes")
    }

    /// The view's own write shows at once, then stays as the store's value; a write the store
    /// refuses (over the size limit) shows at once too, then goes back to the store's value, with
    /// the refusal readable.
    @Test func aWriteShowsAtOnceAndARefusedOneGoesBackWithItsError() async throws {
      let container = try SharedContainer(directory: directory.path)
      let view = ThemeView()
      let host = ViewHost(view.liaisonContainer(container))
      let defaults = try await container.defaults("settings")
      view.binding.wrappedValue = "dark"
      #expect(view.binding.wrappedValue == "dark", "shown before the store answered")
      try await evaluations(of: host, until: Text("dark"))
      try waitUntil("the store has the write") { try defaults.get(DefaultsKey<String>("theme")) == "dark" }

      let huge = String(repeating: "x", count: 2 << 20)
      view.binding.wrappedValue = huge
      #expect(view.binding.wrappedValue.count == huge.count, "shown before the store refused it")
      // (The refusal may come before the next frame: the view then never draws the refused value.)
      try await evaluations(of: host, until: "the store's value, with the refusal") {
        $0 == Text("dark") && view.error != nil
      }
      #expect(view.error?.code == .tooLarge, "\(String(describing: view.error))")
    }

    /// A preview's container in one line: a new, empty folder of its own (mode 0700) each time,
    /// where the view shows its default and writes.
    @Test func aPreviewGetsAThrowawayContainerInOneLine() async throws {
      let view = ThemeView()
      let container = try SharedContainer.temporary()
      let host = ViewHost(view.liaisonContainer(container))
      #expect(host.body as? Text == Text("system"))
      view.binding.wrappedValue = "dark"
      try await evaluations(of: host, until: Text("dark"))
      let other = try SharedContainer.temporary()
      #expect(other.directory != container.directory)
      var status = stat()
      #expect(stat(container.directory, &status) == 0 && status.st_mode & 0o777 == 0o700)
      try? FileManager.default.removeItem(atPath: container.directory)
      try? FileManager.default.removeItem(atPath: other.directory)
    }

    /// With no container in the environment, the view shows the default, and the error says what
    /// to do.
    @Test func withoutAContainerTheViewShowsTheDefaultAndWhy() {
      let view = ThemeView()
      let host = ViewHost(view)
      #expect(host.body as? Text == Text("system"))
      #expect(view.error?.code == .invalidArgument)
      #expect(view.error?.message.contains(".liaisonContainer(_:)") == true, "\(String(describing: view.error))")
    }

  }
#endif
