#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonStore
  import LiaisonSwiftUI
  import LiaisonTestSupport
  import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models
  import Testing

  #if canImport(SwiftUIModel)
    import SwiftUIModel  // hosts the view properties' views, as SwiftUI does (Linux only)
  #endif

  /// The observable models, on both backends, following writes, claims, deaths and sends made by
  /// other processes. Serialized: the last test counts the model tasks of the whole process.
  @Suite("Models up to the view: another process's change updates them", .serialized)
  struct ModelTests {

    /// The peer's messages (`place-msend`).
    struct PeerMessage: Codable, Sendable, Equatable {
      let sender: String
      let n: Int
    }

    /// `withObservationTracking` on the value fires after another process's `set`, and the new
    /// value is then readable on the main actor.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func aValueFollowsAnotherProcesssSet(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await followsSets(try await place.openStore(), writer: try place.peer())
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func followsSets(_ store: some CoordinationStore, writer: Peer) async throws {
      let volume = try await ObservedValue(DefaultsKey<Int>("volume"), in: try await store.defaults("settings"))
      #expect(await volume.value == nil)
      for value in [7, 8, 9] {
        let changed = await changeOf { _ = volume.value }
        try writer.send(.placeDset, "settings", "volume", value)
        try await waitForChange(changed, "the value's change after the peer's set of \(value)")
        try await until("the value is \(value)", observing: { volume.value }, satisfies: { $0 == value })
      }
    }

    #if canImport(SwiftUIModel)
      /// A view with one property of each kind, as an app would write it.
      struct EveryPartView: View {
        @SharedValue("volume", in: "settings") var volume = 0
        @SharedPresence("recording") var isRecording: Bool
        @SharedSignal("notes-changed") var notesChanged
        @SharedInbox("links", sender: "app") var links: [MailboxEnvelope<PeerMessage>]

        var body: Text {
          Text("\(volume) \(isRecording) \(notesChanged)/\($notesChanged.state) \(links.map(\.payload.n))")
        }

        func done(_ link: MailboxEnvelope<PeerMessage>) -> Task<Void, any Error> { $links.acknowledge([link]) }
      }

      /// The view properties, in a view hosted in SwiftUI's model, follow other processes on each
      /// backend: a set, a claim and its holder's SIGKILL, posts, sends; and the view acknowledges.
      /// (On PostgreSQL the first frame shows the defaults: its reads are asynchronous.)
      @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: Backend.allCases)
      @MainActor func viewPropertiesFollowOtherProcesses(_ backend: Backend) async throws {
        let place = try BackendPlace(backend)
        let view = EveryPartView()
        let host = ViewHost(view.liaisonContainer(try await place.openStore()))
        #expect(host.body as? Text == Text("0 false 0/0 []"))
        let writer = try place.peer()
        try writer.send(.placeDset, "settings", "volume", 7)
        try await evaluations(of: host, until: Text("7 false 0/0 []"))
        let holder = try place.peer()
        try holder.send(.placeClaim, "recording")
        try await evaluations(of: host, until: Text("7 true 0/0 []"))
        holder.kill()
        try await evaluations(of: host, until: Text("7 false 0/0 []"))
        for state in [3, 4] { try writer.send(.placePost, "notes-changed", state) }
        try await evaluations(of: host, until: Text("7 false 2/4 []"))
        try writer.send(.placeMsend, "links", "web", 2)
        try await evaluations(of: host, until: Text("7 false 2/4 [0, 1]"))
        try await view.done(view.links[0]).value
        try await evaluations(of: host, until: Text("7 false 2/4 [1]"))
        withExtendedLifetime(place) {}
      }
    #endif

    /// The models' own writes on each backend: a `set` shows at once and reaches the store; an
    /// `update` is atomic against another process's increments; a refused write (over the size
    /// limit) goes back to the store's value with the refusal in `error`; an inbox's
    /// acknowledgement after its close fails, in `error` too.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    @MainActor func aModelsOwnWritesAndTheirFailures(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await ownWrites(try await place.openStore(), place: place)
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    @MainActor private func ownWrites(_ store: some CoordinationStore, place: BackendPlace) async throws {
      let defaults = try await store.defaults("own")
      let theme = try await ObservedValue(DefaultsKey<String>("theme"), in: defaults)
      let write = theme.set("dark")
      #expect(theme.value == "dark", "shown before the store answered")
      try await write.value
      #expect(try await defaults.get(DefaultsKey<String>("theme")) == "dark")
      let refused = theme.set(String(repeating: "x", count: 2 << 20))
      await #expect(throws: LiaisonError.self) { try await refused.value }
      try await until("the store's value is back", observing: { theme.value }, satisfies: { $0 == "dark" })
      #expect(theme.error?.code == .tooLarge)

      let counter = try await ObservedValue(DefaultsKey<Int>("counter"), in: defaults)
      let incrementer = try place.peer()
      incrementer.start(.placeDincrement, "own", "counter", 200)
      for _ in 0..<200 { try await counter.update { ($0 ?? 0) + 1 } }
      #expect(try incrementer.child.readLine(timeout: 600) == "ok done")
      try await until("the model shows 400", observing: { counter.value }, satisfies: { $0 == 400 })

      let inbox = try await ObservedInbox(try await store.mailbox("own", sender: "app"), of: PeerMessage.self)
      try place.peer().send(.placeMsend, "own", "web", 1)
      try await until("the inbox shows the message", observing: { inbox.messages.count }, satisfies: { $0 == 1 })
      let message = inbox.messages[0]
      await inbox.close()
      await #expect(throws: LiaisonError.self) { try await inbox.acknowledge([message]).value }
      #expect(inbox.error?.code == .closed)
    }

    /// A burst of 1,000 atomic increments by another process: the model ends on the last value,
    /// through at most one update per update interval (500 ms), and one at once, however long a
    /// loaded machine (or a sanitizer) makes the burst take: the bound is counted from the time
    /// the burst took, not assumed. (A fixed bound of 250 updates assumed the burst took under two
    /// minutes.)
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func aBurstOfWritesCoalesces(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      // A server of its own: every write notifies every connection that listens on its server,
      // and a thousand of them on the shared one would keep the event loops of every other
      // test's containers in this process busy, past their reply bounds.
      let server = backend == .postgres ? try PostgresTestServer.start() : nil
      let place = try BackendPlace(backend, server: server)
      try await coalescesABurst(try await place.openStore(), writer: try place.peer())
      withExtendedLifetime(place) {}
      server?.remove()
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func coalescesABurst(_ store: some CoordinationStore, writer: Peer) async throws {
      let interval = Duration.milliseconds(500)
      let started = ContinuousClock.now
      let counter = try await ObservedValue(
        DefaultsKey<Int>("counter"), in: try await store.defaults("burst"), updateInterval: interval)
      try writer.send(.placeDincrement, "burst", "counter", 1000, timeout: 600)
      try await until("the model shows the last write", observing: { counter.value }, satisfies: { $0 == 1000 })
      let updates = await counter.updateCount
      let took = ContinuousClock.now - started
      // One at once, one per interval that passed, and one for an interval under way.
      let most = Int(took / interval) + 2
      #expect(updates <= most, "\(updates) main-actor updates for 1,000 writes in \(took), at most \(most)")
    }

    /// A model's rest between updates, on a manual clock: what is written while it rests comes as
    /// one update when the rest ends, not before. No sleep: the real-time coalescing of a burst
    /// from another process is ``aBurstOfWritesCoalesces(_:)``.
    @Test(.enabled(if: modelsExist))
    @MainActor func writesDuringARestComeAsOneUpdateAfterIt() async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let manual = ManualClock()
      let directory = TemporaryDirectory()
      let container = try SharedContainer(directory: directory.path, clock: manual.clock)
      let defaults = try await container.defaults("burst")
      let key = DefaultsKey<Int>("counter")
      var counter: ObservedValue<SharedDefaults, Int>? = try await ObservedValue(
        key, in: defaults, updateInterval: .seconds(1))

      // The first change after a quiet moment shows at once; then the model rests.
      try await defaults.set(1, for: key)
      try await until("the first write shows", observing: { counter?.value }, satisfies: { $0 == 1 })
      await manual.waitForSleepers(1)
      let shown = try #require(counter?.updateCount)

      // A burst during the rest: nothing shows until the rest ends, then the last write, once.
      for value in 2...100 { try await defaults.set(value, for: key) }
      await Task.yield()
      #expect(counter?.value == 1)
      #expect(counter?.updateCount == shown)
      manual.advance(by: .seconds(1) - .nanoseconds(1))
      #expect(counter?.updateCount == shown)
      manual.advance(by: .nanoseconds(1))
      try await until("the last write shows", observing: { counter?.value }, satisfies: { $0 == 100 })
      #expect(counter?.updateCount == shown + 1)

      // Released while it rests (the manual clock stands still): its task ends all the same.
      counter = nil
      try await poll("no model task runs") { @Sendable in ModelFollowing.runningCount == 0 }
      withExtendedLifetime(directory) {}
    }

    /// A presence model follows a claim in another process, and its holder's SIGKILL.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func aPresenceFollowsAClaimAndItsHoldersDeath(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await followsAClaim(try await place.openStore(), place: place)
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func followsAClaim(_ store: some CoordinationStore, place: BackendPlace) async throws {
      let recording = try await ObservedPresence(try store.presence("recording"))
      #expect(await !recording.isActive)
      let holder = try place.peer()
      let claimed = await changeOf { _ = recording.isActive }
      try holder.send(.placeClaim, "recording", "episode", "7")
      try await waitForChange(claimed, "the presence's change after the peer's claim")
      try await until(
        "the model shows the claim", observing: { recording.holder },
        satisfies: { $0?.processID == holder.pid && $0?.info == "episode 7" })
      let released = await changeOf { _ = recording.isActive }
      holder.kill()
      try await waitForChange(released, "the presence's change after its holder was killed")
      try await until("the model shows the presence stopped", observing: { recording.isActive }, satisfies: { !$0 })
    }

    /// A signal model shows the last state another process posted.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func aSignalShowsTheLastPost(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await showsPosts(try await place.openStore(), poster: try place.peer())
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func showsPosts(_ store: some CoordinationStore, poster: Peer) async throws {
      let changed = try await ObservedSignal(try store.signal("notes-changed"))
      #expect(await changed.notifiedAt == nil)
      for state in [3, 4, 5] { try poster.send(.placePost, "notes-changed", state) }
      try await until("the model shows the last post", observing: { changed.state }, satisfies: { $0 == 5 })
      #expect(await changed.notifiedAt != nil)
    }

    /// An inbox shows what another process sends, without being asked; acknowledging from the
    /// model removes the message from it and from the mailbox.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func anInboxShowsWhatAnotherProcessSends(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await showsSends(try await place.openStore(), place: place)
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func showsSends(_ store: some CoordinationStore, place: BackendPlace) async throws {
      let inbox = try await ObservedInbox(try await store.mailbox("links", sender: "app"), of: PeerMessage.self)
      #expect(await inbox.messages.isEmpty)
      #expect(await inbox.waitingCount == 0)
      let sender = try place.peer()
      let arrived = await changeOf { _ = inbox.messages }
      try sender.send(.placeMsend, "links", "web", 3)
      try await waitForChange(arrived, "the inbox's change after the peer's sends")
      try await until(
        "the inbox shows 3 messages", observing: { inbox.messages.map(\.payload.n) }, satisfies: { $0 == [0, 1, 2] })
      #expect(await inbox.waitingCount == 3)
      let first = try #require(await inbox.messages.first)
      try await inbox.acknowledge([first]).value
      #expect(await inbox.messages.map(\.payload.n) == [1, 2])
      #expect(await inbox.waitingCount == 2)
      #expect(try await inbox.mailbox.count() == 2)
      // Closed: no error shown, and the messages it showed and did not acknowledge go to the next
      // receiver.
      await inbox.close()
      #expect(await inbox.error == nil)
      let next = try await inbox.mailbox.receiver(timeout: .seconds(60))
      let left = try await next.receive(PeerMessage.self, limit: 10, timeout: .seconds(60))
      #expect(left.map(\.payload.n) == [1, 2])
      await next.close()
    }

    /// Released models leave nothing behind: the place's watches return to what they were, no
    /// model task runs, and the inbox's receiver is closed (another can take the mailbox).
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), .enabled(if: modelsExist),
      arguments: Backend.allCases)
    func releasedModelsLeaveNoWatchOrTask(_ backend: Backend) async throws {
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
      let place = try BackendPlace(backend)
      try await releases(try await place.openStore())
      withExtendedLifetime(place) {}
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func releases(_ store: some CoordinationStore) async throws {
      let watchesBefore = liveWatches(store)
      try await makeAndRelease(store)
      try await poll("the watches return to \(watchesBefore)") { liveWatches(store) == watchesBefore }
      // Only this suite makes models, one test at a time: none may be left running.
      try await poll("no model task runs") { ModelFollowing.runningCount == 0 }
      let mailbox = try await store.mailbox("released", sender: "tests")
      let receiver = try await mailbox.receiver(timeout: .seconds(60))
      await receiver.close()
    }

    @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
    private func makeAndRelease(_ store: some CoordinationStore) async throws {
      var value: ObservedValue<_, Int>? = try await ObservedValue(
        DefaultsKey<Int>("count"), in: try await store.defaults("released"))
      var presence: ObservedPresence? = try await ObservedPresence(try store.presence("released"))
      var signal: ObservedSignal? = try await ObservedSignal(try store.signal("released"))
      var inbox: ObservedInbox<_, Int>? = try await ObservedInbox(
        try await store.mailbox("released", sender: "tests"), of: Int.self)
      #expect(ModelFollowing.runningCount >= 4)
      #expect(value != nil && presence != nil && signal != nil && inbox != nil)
      (value, presence, signal, inbox) = (nil, nil, nil, nil)
    }

    /// This process's watches of the place: the folder's, or the PostgreSQL container's.
    private func liveWatches(_ store: some CoordinationStore) -> Int {
      if let folder = store as? SharedContainer { return folder.liveWatchCount }
      if let postgres = store as? PostgresContainer { return postgres.liveWatchCount }
      Issue.record("a place of neither backend: \(type(of: store))")
      return -1
    }
  }

  // MARK: Observing from the main actor

  /// Waits until `condition` holds, for at most 60 s, looking again every 2 ms: for what no
  /// observation reports (the counts of watches and tasks).
  private func poll(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    while !condition() {
      try #require(ContinuousClock.now < deadline, "timed out after 60 s waiting until \(what)")
      try await Task.sleep(for: .milliseconds(2))
    }
  }
#endif
