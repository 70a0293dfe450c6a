#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// `PostgresDefaults` in one process: the API's round trips, own writes seen at once, and
  /// transactions (atomic, rolled back on error, refusing a write that would wait for itself).
  @Suite("PostgreSQL: shared defaults in one process")
  struct PostgresDefaultsTests {
    private func open() async throws -> PostgresContainer {
      let server = try PostgresTestServer.shared.get()
      return try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "defaults-\(UInt32.random(in: 0...UInt32.max))")
    }

    /// Each write is seen by the next `get` of the same process at once (cached or not), and
    /// every reading form agrees.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func ownWritesAreSeenAtOnceByEveryReadingForm() async throws {
      let place = try await open()
      let defaults = try await place.defaults("settings")
      let other = try await place.defaults("other")
      let theme = DefaultsKey<String>("theme")
      let blob = DefaultsKey<Data>("blob")
      #expect(try await defaults.get(theme) == nil)
      for value in ["dark", "light", "sepia"] {
        try await defaults.set(value, for: theme)
        #expect(try await defaults.get(theme) == value)
        #expect(try await defaults.get(theme) == value)  // from the cache
      }
      // The cache keeps one decoded form; reading as another type decodes again, or refuses.
      try await defaults.set(5, for: DefaultsKey<Int>("five"))
      #expect(try await defaults.get(DefaultsKey<Int>("five")) == 5)
      #expect(try await defaults.get(DefaultsKey<Double>("five")) == 5.0)
      #expect(try await defaults.get(DefaultsKey<Int>("five")) == 5)
      let mismatch = await #expect(throws: LiaisonError.self) { try await defaults.get(DefaultsKey<String>("five")) }
      #expect(mismatch?.code == .typeMismatch)
      try await defaults.remove(DefaultsKey<Int>("five"))
      try await defaults.set(Data([1, 2, 3]), for: blob)
      try await defaults.setJSON(Data(#"{"a":1}"#.utf8), for: LiaisonName("json"))
      try await other.set(1, for: DefaultsKey<Int>("n"))
      #expect(try await defaults.rawValue(for: LiaisonName("blob")) == .data(Data([1, 2, 3])))
      #expect(try await defaults.rawValue(for: LiaisonName("json")) == .json(Data(#"{"a":1}"#.utf8)))
      #expect(try await defaults.keys() == ["blob", "json", "theme"])
      #expect(try await defaults.snapshot()["theme"] == .json(Data(#""sepia""#.utf8)))
      let domains = try await place.defaultsDomains()
      #expect(domains.map(\.domain.rawValue) == ["other", "settings"])
      #expect(domains.map(\.keyCount) == [1, 3])
      await #expect(throws: LiaisonError.self) {
        try await defaults.setJSON(Data("{nope".utf8), for: LiaisonName("json"))
      }
      try await defaults.remove(theme)
      #expect(try await defaults.get(theme) == nil)
      try await defaults.removeAll()
      #expect(try await defaults.keys() == [])
      #expect(try await defaults.get(blob) == nil)
      #expect(try await other.get(DefaultsKey<Int>("n")) == 1)
    }

    /// A transaction's writes are seen together; an error in its body writes nothing; a write of
    /// the same domain inside it throws `invalidArgument` instead of waiting for itself; `update`
    /// returning `nil` removes the value.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func transactionsAreAtomicAndRollBackOnError() async throws {
      struct Refused: Error {}
      let place = try await open()
      let defaults = try await place.defaults("accounts")
      let (a, b) = (DefaultsKey<Int>("a"), DefaultsKey<Int>("b"))
      try await defaults.set(10, for: a)
      try await defaults.transaction { transaction in
        let balance = try await transaction.get(a) ?? 0
        try await transaction.set(balance - 3, for: a)
        try await transaction.set(3, for: b)
      }
      #expect(try await defaults.get(a) == 7)
      #expect(try await defaults.get(b) == 3)
      await #expect(throws: Refused.self) {
        try await defaults.transaction { transaction in
          try await transaction.set(0, for: a)
          throw Refused()
        }
      }
      #expect(try await defaults.get(a) == 7)
      let nested = await #expect(throws: LiaisonError.self) {
        try await defaults.transaction { _ in try await defaults.set(1, for: b) }
      }
      #expect(nested?.code == .invalidArgument)
      #expect(try await defaults.update(b) { $0.map { $0 * 2 } } == 6)
      #expect(try await defaults.update(b) { _ in nil } == nil)
      #expect(try await defaults.get(b) == nil)
      let tooLarge = await #expect(throws: LiaisonError.self) {
        try await defaults.set(Data(count: PostgresDefaults.maximumValueSize + 1), for: DefaultsKey<Data>("big"))
      }
      #expect(tooLarge?.code == .tooLarge)
    }

    /// A `set` that finds another container's transaction holding the domain waits for it, even
    /// past the reply bound of a fifth of the detection bound (2 s), instead of failing as if the
    /// server were gone; it is written after the transaction, so its value is the one that stays.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aWriteWaitsForALongTransactionInsteadOfFailing() async throws {
      let place = try await open()
      let elsewhere = try await PostgresContainer(
        url: BackendPlace.url(try PostgresTestServer.shared.get()), namespace: place.namespace.rawValue)
      let key = DefaultsKey<String>("owner")
      let (entered, enter) = AsyncStream.makeStream(of: Void.self)
      let transaction = Task {
        try await elsewhere.defaults("busy").transaction { transaction in
          try await transaction.set("transaction", for: key)
          enter.yield()
          try await Task.sleep(for: .seconds(3))  // the work of a long transaction
        }
      }
      var iterator = entered.makeAsyncIterator()
      await iterator.next()
      try await place.defaults("busy").set("set", for: key)
      try await transaction.value
      #expect(try await place.defaults("busy").get(key) == "set")
      #expect(try await elsewhere.defaults("busy").get(key) == "set")
    }
  }
#endif
