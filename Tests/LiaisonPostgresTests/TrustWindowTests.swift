#if Postgres
  import Liaison
  import LiaisonTestSupport
  import PostgresNIO
  import Testing

  @testable import LiaisonPostgres

  /// A lease's trust window (`DetectionTiming.leaseTrusted`), on a manual clock: a holder whose
  /// renewals fail holds its lease until the window closes, not a nanosecond longer. No server (a
  /// port that refuses every connection, as a cut network would fail every renewal), no sleep.
  @Suite("Trust windows on a manual clock")
  struct TrustWindowTests {
    @Test func aLeaseWhoseRenewalsFailIsLostWhenItsTrustRunsOut() async throws {
      let manual = ManualClock()
      let refusing = PostgresConnection.Configuration(
        host: "127.0.0.1", port: 1, username: "nobody", password: nil, database: nil, tls: .disable)
      let connector = Connector(
        targets: ConnectionTargets(targets: [ConnectionTarget(configuration: refusing)]),
        timing: DetectionTiming(bound: .seconds(10)), logger: PostgresContainer.Configuration.quietLogger,
        maximumIdle: 0,
        clock: manual.clock)
      let lease = HeldLease(
        kind: .lock(id: 1, mode: .exclusive), holder: "test", sent: manual.now, connector: connector,
        what: "The lock 'trust'")
      #expect(lease.isHeld)
      await manual.waitForSleepers(1)  // the monitor waits for its first check

      // Renewals are tried (and fail) at every check meanwhile; the lease holds until the window
      // closes, 6 s (three fifths of the bound) after the take was sent.
      manual.advance(by: connector.timing.leaseTrusted - .nanoseconds(1))
      #expect(lease.isHeld)
      #expect(lease.loss == nil)
      manual.advance(by: .nanoseconds(1))
      #expect(!lease.isHeld)
      #expect(lease.loss?.code == .lost)
      await connector.closeAll()
    }
  }
#endif
