#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonStore
  import LiaisonTestSupport
  import Testing

  /// One test body for the five parts, written against the protocol family alone
  /// (`some CoordinationStore`) and run on both backends: what compiles and holds here holds on
  /// a folder and on PostgreSQL alike. The promises across processes are the conformance suites'.
  @Suite("One API: the five parts through the protocols, on every backend")
  struct OneAPITests {
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: Backend.allCases)
    func everyPartThroughTheProtocols(_ backend: Backend) async throws {
      let place = try BackendPlace(backend)
      try await exercise(try await place.openStore())
    }

    struct Profile: Codable, Sendable, Equatable {
      var displayName: String
    }

    /// The JSON coders the caller passes to the place encode values and payloads, and decode
    /// them back, on every backend.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: Backend.allCases)
    func theCallersJSONCodersEncodeAndDecode(_ backend: Backend) async throws {
      let backendPlace = try BackendPlace(backend)  // its folder lasts as long as this
      let place = try await backendPlace.openStore(
        encoder: {
          let encoder = JSONEncoder()
          encoder.keyEncodingStrategy = .convertToSnakeCase
          return encoder
        },
        decoder: {
          let decoder = JSONDecoder()
          decoder.keyDecodingStrategy = .convertFromSnakeCase
          return decoder
        })
      try await exerciseCoders(place)
      withExtendedLifetime(backendPlace) {}
    }

    private func exerciseCoders(_ place: some CoordinationStore) async throws {
      let defaults = try await place.defaults("profiles")
      let key = DefaultsKey<Profile>("me")
      try await defaults.set(Profile(displayName: "Ada"), for: key, timeout: nil)
      guard case .json(let text) = try await defaults.rawValue(for: key.name) else {
        Issue.record("not stored as JSON")
        return
      }
      #expect(String(decoding: text, as: UTF8.self).contains("display_name"))
      #expect(try await defaults.get(key) == Profile(displayName: "Ada"))
      let inbox = try await place.mailbox("inbox", sender: "tests")
      _ = try await inbox.send(Profile(displayName: "Bob"), id: nil, timeout: nil)
      let received = try await inbox.withReceiver { receiver in
        try await receiver.receive(Profile.self, limit: 10, timeout: .zero)
      }
      #expect(received.map(\.payload) == [Profile(displayName: "Bob")])
    }

    /// A standby receiver waits for the active one to end, and takes over when it does; it times
    /// out while the active one lasts.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: Backend.allCases)
    func aStandbyReceiverTakesOverWhenTheActiveOneCloses(_ backend: Backend) async throws {
      let place = try BackendPlace(backend)  // its folder lasts as long as this
      try await exerciseStandby(try await place.openStore())
      withExtendedLifetime(place) {}
    }

    private func exerciseStandby(_ place: some CoordinationStore) async throws {
      let mailbox = try await place.mailbox("standby", sender: "tests")
      let active = try await mailbox.receiver()
      let busy = await #expect(throws: LiaisonError.self) { try await mailbox.receiver() }
      #expect(busy?.code == .alreadyClaimed)
      let timedOut = await #expect(throws: LiaisonError.self) {
        try await mailbox.receiver(timeout: .milliseconds(100))
      }
      #expect(timedOut?.code == .timedOut)
      let standby = Task { try await mailbox.receiver(timeout: .seconds(60)) }
      await active.close()
      let next = try await standby.value
      _ = try await mailbox.send("after", id: nil, timeout: nil)
      #expect(try await next.receive(String.self, limit: 1, timeout: .seconds(30)).map(\.payload) == ["after"])
      await next.close()
    }

    func exercise(_ place: some CoordinationStore) async throws {
      try await exerciseLock(place)
      try await exercisePresence(place)
      try await exerciseSignal(place)
      try await exerciseDefaults(place)
      try await exerciseMailbox(place)
    }

    private func exerciseLock(_ place: some CoordinationStore) async throws {
      let lock = try place.lock("one-api")
      let held = try #require(try await lock.tryLock(.exclusive))
      #expect(try await lock.tryLock(.exclusive) == nil, "a second exclusive grant while the first is held")
      let first = try await held.fencingToken()
      await held.unlock()
      #expect(!held.isHeld && held.loss == nil)
      let second = try await lock.withLock(.exclusive, timeout: .seconds(30)) { 7 }
      #expect(second == 7)
      let again = try await lock.lock(.exclusive, timeout: .seconds(30))
      #expect(try await again.fencingToken() > first)
      await again.unlock()
    }

    private func exercisePresence(_ place: some CoordinationStore) async throws {
      let presence = try place.presence("one-api")
      #expect(try await !presence.isActive)
      let (held, active, info) = try await presence.withClaim(info: "one body") { claim in
        (claim.isHeld, try await presence.isActive, try await presence.holder?.info)
      }
      #expect(held && active && info == "one body")
      // Released when the scope returns, on every backend: no moment reads active afterwards.
      #expect(try await !presence.isActive)
    }

    private func exerciseSignal(_ place: some CoordinationStore) async throws {
      let signal = try place.signal("one-api")
      let before = try await signal.sequence
      try await signal.post(state: 42)
      let posted = try await signal.waitForPost(after: before, timeout: .seconds(30))
      #expect(posted.state == 42 && posted.sequence > before)
      let error = await #expect(throws: LiaisonError.self) {
        try await signal.waitForPost(after: posted.sequence, timeout: .milliseconds(20))
      }
      #expect(error?.code == .timedOut)
    }

    private func exerciseDefaults(_ place: some CoordinationStore) async throws {
      let defaults = try await place.defaults("one-api")
      let count = try DefaultsKey<Int>(validating: "count")
      try await defaults.set(1, for: count, timeout: nil)
      #expect(try await defaults.get(count) == 1)
      let updated = try await defaults.update(count) { ($0 ?? 0) + 1 }
      #expect(updated == 2)
      #expect(try await defaults.keys() == ["count"])
      #expect(
        try await defaults.setJSON(Data("5".utf8), for: count.name, replacing: .json(Data("1".utf8)), timeout: nil)
          == false)
      var values = try await defaults.changes(of: count).makeAsyncIterator()
      #expect(try await values.next() == .some(2))
      try await defaults.remove(count, timeout: nil)
      #expect(try await defaults.get(count) == nil)
    }

    private func exerciseMailbox(_ place: some CoordinationStore) async throws {
      let mailbox = try await place.mailbox("one-api", sender: "tester")
      let stored = try await mailbox.send("hello", id: "m1", timeout: nil)
      #expect(stored == MailboxReceipt(id: "m1", isStored: true))
      let repeated = try await mailbox.send("hello", id: "m1", timeout: nil)
      #expect(repeated == MailboxReceipt(id: "m1", isStored: false), "a repeated id is not stored again")
      #expect(try await mailbox.count() == 1)
      try await mailbox.withReceiver { receiver in
        let received = try await receiver.receive(String.self, limit: 10, timeout: .seconds(30))
        #expect(received.map(\.payload) == ["hello"] && received.first?.sender == "tester")
        try await receiver.acknowledge(received, timeout: nil)
        let error = await #expect(throws: LiaisonError.self) {
          try await receiver.receive(String.self, limit: 1, timeout: .milliseconds(20))
        }
        #expect(error?.code == .timedOut)
      }
      #expect(try await mailbox.count() == 0)
      // The receiver was closed by the scope: the mailbox takes a new one at once.
      let next = try await mailbox.receiver()
      await next.close()
    }
  }
#endif
