#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import Testing

  @Suite("PostgreSQL smoke")
  struct PostgresSmokeTests {
    let url = ProcessInfo.processInfo.environment["LIAISON_SMOKE_URL"] ?? ""

    @Test(.enabled(if: !ProcessInfo.processInfo.environment["LIAISON_SMOKE_URL"].isNil))
    func locksClaimsAndSignalsWork() async throws {
      let namespace = "smoke-\(UInt32.random(in: 0...UInt32.max))"
      let place = try await PostgresContainer(url: url, namespace: namespace)
      let other = try await PostgresContainer(url: url, namespace: namespace)
      let lock = try place.lock("job")
      let held = try #require(try await lock.tryLock(.exclusive))
      let first = try held.fencingToken()
      #expect(try await other.lock("job").tryLock(.exclusive) == nil)
      await held.unlock()
      let again = try #require(try await other.lock("job").tryLock(.exclusive))
      #expect(try again.fencingToken() == first + 1)
      let waiting = Task { try await lock.lock(.exclusive, timeout: .seconds(5)) }
      await again.unlock()
      let third = try await waiting.value
      #expect(try third.fencingToken() == first + 2)
      await #expect(throws: LiaisonError.self) {
        try await other.lock("job").lock(.exclusive, timeout: .milliseconds(100))
      }
      await third.unlock()

      let presence = try place.presence("recorder")
      #expect(try await presence.holder == nil)
      let changes = try await other.presence("recorder").changes()
      var iterator = changes.makeAsyncIterator()
      let initial = try await iterator.next()
      #expect(initial == .released, "\(String(describing: initial))")
      let claim = try await presence.claim(info: "take 1")
      let claimed = try await iterator.next()
      guard case .claimed(let holder) = claimed else {
        Issue.record("got \(String(describing: claimed))")
        return
      }
      #expect(holder.info == "take 1")
      await #expect(throws: LiaisonError.self) { try await other.presence("recorder").claim(info: nil) }
      await claim.release()
      #expect(try await iterator.next() == .released)

      let signal = try place.signal("changed")
      let notifications = try await other.signal("changed").notifications(ignoringOwnPosts: false)
      var signals = notifications.makeAsyncIterator()
      try await signal.post(state: 42)
      let notification = try #require(await signals.next())
      #expect(notification.state == 42)
      #expect(try await other.signal("changed").state == 42)
    }
  }

  extension Optional {
    fileprivate var isNil: Bool { self == nil }
  }
#endif
