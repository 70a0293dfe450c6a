import Foundation
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

/// A store write waits for another process's write. While a process holds the store's lock (here
/// by command; in the field, stopped by a debugger or SIGSTOP in the middle of a write), an
/// `async` write must leave its actor free, and a blocking write must end at its timeout.
@Suite("Waiting for another process's write")
struct StoreWaitTests {
  let directory = TemporaryDirectory()

  @Test @MainActor func anAsyncSetWaitingForAnotherProcessLeavesTheMainActorFree() async throws {
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    let key = DefaultsKey<Int>("volume")
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "defaults.write")
    let writer = Task { @MainActor in try await defaults.set(7, for: key) }
    #expect(await mainActorRuns(while: peer, holds: "store/defaults.write"))
    #expect(try defaults.get(key) == nil)  // still waiting
    try peer.send(.unlock, "store/defaults.write")
    try await writer.value
    #expect(try defaults.get(key) == 7)
  }

  @Test func aBlockingSetTimesOutWithAClearError() throws {
    let defaults = try SharedContainer(directory: directory.path).defaults("settings")
    let key = DefaultsKey<Int>("volume")
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "defaults.write")
    let error = #expect(throws: LiaisonError.self) { try defaults.set(7, for: key, timeout: .milliseconds(50)) }
    #expect(error?.code == .timedOut)
    #expect(error?.message.contains("another process's write of the store") == true)
    #expect(try defaults.get(key) == nil)
    try peer.send(.unlock, "store/defaults.write")
    try defaults.set(7, for: key, timeout: .seconds(60))
    #expect(try defaults.get(key) == 7)
  }

  @Test func anAsyncUpdateTimesOutAndACancelledOneWritesNothing() async throws {
    let defaults = try await SharedContainer(directory: directory.path).defaults("settings")
    let key = DefaultsKey<Int>("launches")
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "defaults.write")
    let error = await #expect(throws: LiaisonError.self) {
      try await defaults.update(key, timeout: .milliseconds(50)) { ($0 ?? 0) + 1 }
    }
    #expect(error?.code == .timedOut)
    let cancelled = Task { try await defaults.update(key) { ($0 ?? 0) + 1 } }
    cancelled.cancel()
    let cancellation = await #expect(throws: LiaisonError.self) { try await cancelled.value }
    #expect(cancellation?.code == .cancelled)
    try peer.send(.unlock, "store/defaults.write")
    #expect(try await defaults.update(key) { ($0 ?? 0) + 1 } == 1)
  }

  /// Quarantining a message that cannot be decoded is a write: while another process holds the
  /// store, each receive waits for it on a thread of its own (Liaison's `liaison-wait`), not on
  /// one of the cooperative pool, even when more receives wait than the pool has threads.
  @Test(.enabled(if: readsProc, "reads /proc (Linux)"))
  func asyncReceivesThatQuarantineWaitOnThreadsOfTheirOwn() async throws {
    let container = try SharedContainer(directory: directory.path)
    let count = ProcessInfo.processInfo.activeProcessorCount + 2
    var receivers: [MailboxReceiver] = []
    for index in 0..<count {
      let mailbox = try await container.mailbox("inbox-\(index)")
      try await mailbox.send("not a number")
      try await mailbox.send(index)
      receivers.append(try mailbox.receiver())
    }
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "mailboxes.write")
    // A receive that ends before the peer lets go failed: the wait below reports its error.
    let failures = Locked<[String]>([])
    // High priority: the cooperative pool (2 threads here) runs queued jobs by priority, and the
    // test runner queues every other test at the start; at the default priority these tasks would
    // wait behind all of them (under TSan in CI, for over a minute).
    let receiving = receivers.map { receiver in
      Task.detached(priority: .high) {
        do {
          return try await receiver.receive(Int.self, limit: 1)
        } catch {
          failures.withLock { $0.append("\(error)") }
          throw error
        }
      }
    }
    try await waitUntilOffThePool("every receive waits on a thread of its own", timeout: 300) {
      if let failure = failures.withLock({ $0.first }) { throw ReceiveFailed(description: failure) }
      return threadsNamed("liaison-wait") >= count
    }
    try peer.send(.unlock, "store/mailboxes.write")
    for (index, task) in receiving.enumerated() {
      let received = try await task.value
      #expect(received.map(\.payload) == [index])
      try await receivers[index].acknowledge(received)
      #expect(try receivers[index].mailbox.count() == 0)  // the other one is quarantined
      #expect(try await receivers[index].removeQuarantined() == 1)
    }
  }

  @Test @MainActor func anAsyncSendWaitingForAnotherProcessLeavesTheMainActorFree() async throws {
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox")
    _ = try mailbox.count()
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "mailboxes.write")
    let sending = Task { @MainActor in try await mailbox.send("hello") }
    #expect(await mainActorRuns(while: peer, holds: "store/mailboxes.write"))
    try peer.send(.unlock, "store/mailboxes.write")
    _ = try await sending.value
    #expect(try mailbox.count() == 1)
  }

  /// Opening a shared database waits while another process opens (migrates) it.
  @Test @MainActor func anAsyncOpeningWaitingForAnotherProcessesMigrationLeavesTheMainActorFree() async throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "database-locks", "journal")
    let opening = Task { @MainActor in try await container.database("journal", migrator: StoreEdgeTests.migrator) }
    #expect(await mainActorRuns(while: peer, holds: "database-locks/journal"))
    try peer.send(.unlock, "database-locks/journal")
    let database = try await opening.value
    #expect(try await database.pool.read { db in try db.tableExists("item") })
  }

  @Test func aBlockingOpeningTimesOutWithAClearError() throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "database-locks", "journal")
    let error = #expect(throws: LiaisonError.self) {
      _ = try container.database("journal", migrator: StoreEdgeTests.migrator, timeout: .milliseconds(50))
    }
    #expect(error?.code == .timedOut)
    #expect(error?.message.contains("opened or migrated the shared database 'journal'") == true)
  }

  /// The first domain a process opens opens the store; a store still to be made waits for the
  /// process that holds its lock (which may be making it).
  @Test @MainActor func anAsyncOpeningOfTheStoreLeavesTheMainActorFree() async throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "defaults.write")
    let opening = Task { @MainActor in try await container.defaults("settings") }
    #expect(await mainActorRuns(while: peer, holds: "store/defaults.write"))
    try peer.send(.unlock, "store/defaults.write")
    #expect(try await opening.value.get(DefaultsKey<Int>("volume")) == nil)
  }

  @Test func aBlockingOpeningOfTheStoreTimesOut() throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "defaults.write")
    let error = #expect(throws: LiaisonError.self) {
      _ = try container.defaults("settings", timeout: .milliseconds(50))
    }
    #expect(error?.code == .timedOut)
    try peer.send(.unlock, "store/defaults.write")
    try container.defaults("settings", timeout: .seconds(60)).set(3, for: DefaultsKey<Int>("volume"))
  }

  /// A store set up already opens at once beside a process that holds its lock (a write, however
  /// long, or a writer stopped in the middle of one), and reads what was committed; a write
  /// waits for the lock, at most its timeout.
  @Test func aStoreSetUpOpensBesideAWriterAndReads() throws {
    let peer = try Peer(container: directory.path)
    try holdStoresSetUp(peer)
    let container = try SharedContainer(directory: directory.path)
    let defaults = try container.defaults("settings")
    #expect(try defaults.get(DefaultsKey<Int>("volume")) == 3)
    #expect(try container.mailbox("inbox").peek().count == 2)
    let error = #expect(throws: LiaisonError.self) {
      try defaults.set(4, for: DefaultsKey<Int>("volume"), timeout: .milliseconds(50))
    }
    #expect(error?.code == .timedOut)
    try peer.send(.unlock, "store/defaults.write")
    try defaults.set(4, for: DefaultsKey<Int>("volume"), timeout: .seconds(60))
    #expect(try defaults.get(DefaultsKey<Int>("volume")) == 4)
  }

  @Test func aStoreSetUpOpensAsynchronouslyBesideAWriter() async throws {
    let peer = try Peer(container: directory.path)
    try holdStoresSetUp(peer)
    let container = try SharedContainer(directory: directory.path)
    #expect(try await container.defaults("settings").get(DefaultsKey<Int>("volume")) == 3)
    #expect(try await container.mailbox("inbox").peek().count == 2)
  }

  /// Makes both stores (a value, two messages), then holds their locks in `peer`.
  private func holdStoresSetUp(_ peer: Peer) throws {
    try peer.send(.dset, "settings", "volume", "3")
    try peer.send(.msend, "inbox", "p", "2")
    try peer.send(.holdlock, "store", "defaults.write")
    try peer.send(.holdlock, "store", "mailboxes.write")
  }

  @Test @MainActor func anAsyncOpeningOfAMailboxLeavesTheMainActorFree() async throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "mailboxes.write")
    let opening = Task { @MainActor in try await container.mailbox("inbox") }
    #expect(await mainActorRuns(while: peer, holds: "store/mailboxes.write"))
    try peer.send(.unlock, "store/mailboxes.write")
    #expect(try await opening.value.count() == 0)
  }

  @Test func aBlockingOpeningOfAMailboxTimesOut() throws {
    let container = try SharedContainer(directory: directory.path)
    let peer = try Peer(container: directory.path)
    try peer.send(.holdlock, "store", "mailboxes.write")
    let error = #expect(throws: LiaisonError.self) { _ = try container.mailbox("inbox", timeout: .milliseconds(50)) }
    #expect(error?.code == .timedOut)
  }
}

/// A receive that ended while it should have been waiting, with its error.
private struct ReceiveFailed: Error, CustomStringConvertible {
  let description: String
}
