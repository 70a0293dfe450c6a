// The "other process" of Liaison's tests.
//
//   LiaisonTestPeer CONTAINER
//
// Reads one command a line on standard input and answers one line on standard output, so that a
// test can drive it step by step and know when each step is done: `ok …` or `error CODE: MESSAGE`.
// It prints `ready PID` when it starts. Closing its standard input ends it.
//
//   lock NAME [shared]          blocking lock              → ok locked
//   trylock NAME [shared]                                  → ok locked | ok busy
//   unlock NAME                                            → ok unlocked
//   waitlock NAME sync|async    blocking or async lock     → ok locked MONOTONIC-NS-WHEN-TAKEN
//   increment NAME FILE COUNT LOG   COUNT times: lock, read the number in FILE, write it + 1,
//                                   unlock; appends "enter exit" (monotonic ns) per hold to LOG
//   claim NAME [INFO…]                                     → ok claimed
//   release NAME                                           → ok released
//   lease NAME MILLISECONDS [INFO…]                        → ok leased
//   active NAME                                            → ok true | ok false
//   suspend | resume                                       → ok suspended | ok resumed
//   host-handler                installs a no-op handler with SA_RESTART for the signal Liaison
//                               interrupts its waits with, as a host program may (the Go runtime
//                               does): send it before any wait → ok installed
//   timedlock NAME MILLISECONDS async lock with that timeout → ok locked | ok timedOut
//   post NAME [STATE]                                      → ok posted
//   burst NAME COUNT            posts states 1…COUNT       → ok posted
//   observe NAME [ignore-own]   starts observing a signal  → ok observing
//   observe-many PREFIX COUNT   observes PREFIX-0…PREFIX-(COUNT-1)
//   unobserve NAME                                         → ok unobserved
//   next [MILLISECONDS]         the next notification received, oldest first
//                                              → ok NAME STATE SEQUENCE | ok none
//   watch-presence NAME         starts observing presence changes → ok watching
//   next-change [MILLISECONDS]  → ok claimed PID WHEN | ok released WHEN | ok none
//                               (WHEN: monotonic ns at which the change was received)
//   signal-residue NAME         an async sequence and a callback observation started and ended,
//                               with descriptor and thread counts, and Liaison's threads left
//                               → ok FDS THREADS FDS THREADS liaison-threads=N
//   lapse-residue NAME          a presence watch that saw a lease lapse (a one-shot deadline
//                               fired), then ended → ok liaison-threads=N
//   threads-named NAME          → ok COUNT (threads of this process called NAME)
//   counts                      → ok DESCRIPTORS THREADS
//   dset DOMAIN KEY INT | dget DOMAIN KEY (→ ok INT | ok nil)
//   dincrement DOMAIN KEY COUNT   COUNT atomic updates +1        → ok done
//   dread DOMAIN KEY COUNT        COUNT reads                    → ok done
//   drefresh DOMAIN KEY COUNTFILE [hang]   refresh a String key whose stale value is "stale";
//                                 the refresh appends a line to COUNTFILE (with `hang`, it then
//                                 writes COUNTFILE.started and never finishes; with
//                                 `timeout=MS`, waits for another refresh at most MS) → ok VALUE
//   dwatch DOMAIN KEY | dnext [MILLISECONDS] (→ ok INT | ok nil | ok none)
//   dbusy                       → ok N (times SQLite's busy handler ran in this process)
//   dbopen NAME VERSION [COUNTFILE [legacy]]   opens the shared database with migrations
//                               v1…vVERSION (and one called legacy); each appends its name to
//                               COUNTFILE when it runs → ok opened
//   dbinsert NAME COUNT         COUNT rows, a transaction each   → ok done
//   dbcount NAME                → ok N
//   dbwatch NAME | dbnext [MILLISECONDS]   a ValueObservation of the row count → ok N | ok none
//   msend MAILBOX SENDER COUNT  COUNT sends, one at a time, of {sender, n: 0…COUNT-1} with ids
//                               SENDER-n                          → ok sent
//   msendid MAILBOX ID TEXT     one send of the string TEXT with id ID → ok ID
//   msendraw MAILBOX TEXT       one send of TEXT's bytes as Data  → ok sent
//   mreceive MAILBOX LOG BATCH  becomes the receiver (→ ok receiving), then for ever: waits for
//                               up to BATCH messages, appends "SENDER N" per message to LOG in
//                               one write, acknowledges them, appends "acked"
//   mreceiver MAILBOX           becomes the receiver and stays it → ok receiver
//   mcount MAILBOX              → ok N (messages waiting)
//   residue NAME    with NAME held elsewhere: a timed-out async wait and a cancelled one, with
//                   this process's descriptor and thread counts before and after
//                                     → ok FDS THREADS FDS THREADS timedOut=CODE cancelled=TYPE

import Dispatch
import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Writes a line to standard output at once (no buffering between the peer and the test).
func say(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

guard CommandLine.arguments.count == 2 else {
  say("usage: LiaisonTestPeer CONTAINER")
  exit(2)
}

let container: SharedContainer
do {
  container = try SharedContainer(directory: CommandLine.arguments[1])
} catch {
  say("error \(error.code): \(error.message)")
  exit(1)
}

var guards: [String: LockGuard] = [:]
var observations: [String: SignalObservation] = [:]
var presenceWatches: [String: Task<Void, Never>] = [:]

/// What observers received, in order, for `next` and `next-change` to hand out.
final class Inbox<Item: Sendable>: Sendable {
  private let items = Locked<[Item]>([])
  private let available = DispatchSemaphore(value: 0)

  func put(_ item: Item) {
    items.withLock { $0.append(item) }
    available.signal()
  }

  func take(milliseconds: Int) -> Item? {
    guard available.wait(timeout: .now() + .milliseconds(milliseconds)) == .success else { return nil }
    return items.withLock { $0.removeFirst() }
  }
}

let notifications = Inbox<SignalNotification>()
let presenceChanges = Inbox<(change: PresenceChange, receivedAt: UInt64)>()
let observerQueue = DispatchQueue(label: "peer.observer")
let defaultsValues = Inbox<String>()
/// One `SharedDefaults` per domain for the peer's life, so that its cache stays warm between
/// commands (a new one per command would never read from a cache).
var defaultsByDomain: [String: SharedDefaults] = [:]
var databases: [String: SharedDatabase] = [:]
var databaseWatches: [AnyDatabaseCancellable] = []
let databaseCounts = Inbox<String>()

@MainActor func defaults(_ domain: String) throws -> SharedDefaults {
  if let open = defaultsByDomain[domain] { return open }
  let opened = try container.defaults(domain)
  defaultsByDomain[domain] = opened
  return opened
}
var claims: [String: PresenceClaim] = [:]
var receivers: [String: MailboxReceiver] = [:]
var receiving: [Task<Void, Never>] = []

/// What `msend` sends and `mreceive` receives.
struct TestMessage: Codable, Sendable {
  let sender: String
  let n: Int
}

/// Appends `text` to the file at `path` in one write.
@Sendable func append(_ text: String, to path: String) {
  let bytes = Array(text.utf8)
  let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
  precondition(fd >= 0, "cannot open \(path)")
  precondition(write(fd, bytes, bytes.count) == bytes.count, "short write to \(path)")
  close(fd)
}
var leases: [String: PresenceLease] = [:]

func monotonicNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Adds one to the decimal number in `path` (a missing or empty file counts as 0).
func incrementFile(_ path: String) {
  let fd = open(path, O_RDWR | O_CREAT, 0o600)
  precondition(fd >= 0, "cannot open \(path)")
  defer { close(fd) }
  var buffer = [UInt8](repeating: 0, count: 32)
  let n = read(fd, &buffer, buffer.count)
  let value = Int(String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self)) ?? 0
  let text = Array(String(value + 1).utf8)
  ftruncate(fd, 0)
  _ = pwrite(fd, text, text.count, 0)
}

@MainActor func run(_ words: [String]) throws -> String {
  let mode: LockMode = words.count > 2 && words[2] == "shared" ? .shared : .exclusive
  switch words.first {
  case "lock":
    guards[words[1]] = try container.lock(words[1]).lock(mode)
    return "locked"
  case "trylock":
    guard let held = try container.lock(words[1]).tryLock(mode) else { return "busy" }
    guards[words[1]] = held
    return "locked"
  case "waitlock":
    let lock = try container.lock(words[1])
    let held: LockGuard
    if words[2] == "async" {
      let result = blocking { () -> Result<LockGuard, LiaisonError> in
        do {
          return .success(try await lock.lock(timeout: nil))
        } catch {
          return .failure(error as! LiaisonError)
        }
      }
      held = try result.get()
    } else {
      held = try lock.lock()
    }
    let takenAt = monotonicNanoseconds()
    guards[words[1]] = held
    return "locked \(takenAt)"
  case "unlock":
    guards.removeValue(forKey: words[1])?.unlock()
    return "unlocked"
  case "increment":
    let lock = try container.lock(words[1])
    var log = ""
    for _ in 0..<Int(words[3])! {
      let held = try lock.lock()
      let enter = monotonicNanoseconds()
      incrementFile(words[2])
      let exit = monotonicNanoseconds()
      held.unlock()
      log += "\(enter) \(exit)\n"
    }
    let fd = open(words[4], O_WRONLY | O_CREAT | O_APPEND, 0o600)
    _ = write(fd, log, log.utf8.count)
    close(fd)
    return "done"
  case "claim":
    let info = words.count > 2 ? words[2...].joined(separator: " ") : nil
    claims[words[1]] = try container.presence(words[1]).claim(info: info)
    return "claimed"
  case "release":
    claims.removeValue(forKey: words[1])?.release()
    leases.removeValue(forKey: words[1])?.release()
    return "released"
  case "lease":
    let info = words.count > 3 ? words[3...].joined(separator: " ") : nil
    leases[words[1]] = try container.presence(words[1]).lease(for: .milliseconds(Int(words[2])!), info: info)
    return "leased"
  case "active":
    return String(try container.presence(words[1]).isActive)
  case "residue":
    return residue(try container.lock(words[1]))
  case "suspended-waits":
    return suspendedWaits(try container.lock(words[1]), count: Int(words[2])!)
  case "post":
    let signal = try container.signal(words[1])
    if words.count > 2 { try signal.post(state: UInt64(words[2])!) } else { try signal.post() }
    return "posted"
  case "burst":
    let signal = try container.signal(words[1])
    for state in 1...UInt64(words[2])! { try signal.post(state: state) }
    return "posted"
  case "observe":
    let ignoringOwn = words.count > 2 && words[2] == "ignore-own"
    observations[words[1]] = try container.signal(words[1]).observe(
      on: observerQueue, ignoringOwnPosts: ignoringOwn, notifications.put)
    return "observing"
  case "observe-many":
    for index in 0..<Int(words[2])! {
      let name = "\(words[1])-\(index)"
      observations[name] = try container.signal(name).observe(on: observerQueue, notifications.put)
    }
    return "observing"
  case "unobserve":
    observations.removeValue(forKey: words[1])?.cancel()
    return "unobserved"
  case "next":
    guard let note = notifications.take(milliseconds: words.count > 1 ? Int(words[1])! : 30_000) else {
      return "none"
    }
    return "\(note.name) \(note.state) \(note.sequence)"
  case "watch-presence":
    let changes = try container.presence(words[1]).changes()
    // Detached: a task started here would run on the main actor, whose thread waits in readLine.
    presenceWatches[words[1]] = Task.detached {
      do {
        for try await change in changes { presenceChanges.put((change, monotonicNanoseconds())) }
      } catch {}
    }
    return "watching"
  case "next-change":
    guard let (change, receivedAt) = presenceChanges.take(milliseconds: words.count > 1 ? Int(words[1])! : 30_000)
    else { return "none" }
    switch change {
    case .claimed(let holder): return "claimed \(holder.processID) \(receivedAt)"
    case .released: return "released \(receivedAt)"
    }
  case "signal-residue":
    return signalResidue(try container.signal(words[1]))
  case "lapse-residue":
    return try lapseResidue(try container.presence(words[1]))
  case "threads-named":
    return String(threadNames().filter { $0 == words[1] }.count)
  case "dset":
    try defaults(words[1]).set(Int(words[3])!, for: DefaultsKey<Int>(validating: words[2]))
    return "set"
  case "dget":
    return try defaults(words[1]).get(DefaultsKey<Int>(validating: words[2])).map(String.init) ?? "nil"
  case "dincrement":
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<Int>(validating: words[2])
    for _ in 0..<Int(words[3])! { try defaults.update(key) { ($0 ?? 0) + 1 } }
    return "done"
  case "dread":
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<Int>(validating: words[2])
    for _ in 0..<Int(words[3])! { _ = try defaults.get(key) }
    return "done"
  case "drefresh":
    let defaults = try defaults(words[1])
    let key = try DefaultsKey<String>(validating: words[2])
    let countFile = words[3]
    let hang = words.count > 4 && words[4] == "hang"
    let timeout: Duration =
      words.count > 4 && words[4].hasPrefix("timeout=") ? .milliseconds(Int(words[4].dropFirst(8))!) : .seconds(60)
    let result = blocking { () -> Result<String, any Error> in
      do {
        return .success(
          try await defaults.refresh(
            key, timeout: timeout, isFresh: { $0 != "stale" },
            using: {
              let line = Array("\(getpid())\n".utf8)
              let fd = open(countFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
              _ = write(fd, line, line.count)
              close(fd)
              if hang {
                close(open(countFile + ".started", O_WRONLY | O_CREAT, 0o600))
                while true { sleep(1000) }
              }
              return "fresh-from-\(getpid())"
            }))
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  case "dwatch":
    let changes = try defaults(words[1]).changes(of: DefaultsKey<Int>(validating: words[2]))
    presenceWatches["defaults." + words[1]] = Task.detached {
      do {
        for try await value in changes { defaultsValues.put(value.map(String.init) ?? "nil") }
      } catch {
        defaultsValues.put("error \(error)")
      }
    }
    return "watching"
  case "dbopen":
    let countFile = words.count > 3 ? words[3] : nil
    var migrator = DatabaseMigrator()
    var names = (1...Int(words[2])!).map { "v\($0)" }
    if words.count > 4 && words[4] == "legacy" { names.append("legacy") }  // one the newer program never had
    for (index, name) in names.enumerated() {
      let version = index + 1
      migrator.registerMigration(name) { db in
        if version == 1 {
          try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        } else {
          try db.execute(sql: "CREATE INDEX item_name_\(version) ON item(name)")
        }
        if let countFile {
          let line = Array("\(name)\n".utf8)
          let fd = open(countFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
          _ = write(fd, line, line.count)
          close(fd)
        }
      }
    }
    databases[words[1]] = try container.database(words[1], migrator: migrator)
    return "opened"
  case "dbinsert":
    let pool = databases[words[1]]!.pool
    for index in 0..<Int(words[2])! {
      try pool.write { db in
        try db.execute(sql: "INSERT INTO item (name) VALUES (?)", arguments: ["\(getpid())-\(index)"])
      }
    }
    return "done"
  case "dbcount":
    return String(
      try databases[words[1]]!.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 })
  case "dbwatch":
    let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 }
      .removeDuplicates()
    databaseWatches.append(
      observation.start(
        in: databases[words[1]]!.pool, scheduling: .async(onQueue: observerQueue), onError: { _ in },
        onChange: { databaseCounts.put(String($0)) }))
    return "watching"
  case "dbnext":
    return databaseCounts.take(milliseconds: words.count > 1 ? Int(words[1])! : 30_000) ?? "none"
  case "dbusy":
    return String(SharedDefaults.sqliteBusyWaits)
  case "dnext":
    return defaultsValues.take(milliseconds: words.count > 1 ? Int(words[1])! : 30_000) ?? "none"
  case "msend":
    let mailbox = try container.mailbox(words[1], sender: words[2])
    for n in 0..<Int(words[3])! {
      try mailbox.send(TestMessage(sender: words[2], n: n), id: "\(words[2])-\(n)")
    }
    return "sent"
  case "msendid":
    return try container.mailbox(words[1]).send(words[3], id: words[2])
  case "msendraw":
    try container.mailbox(words[1]).send(Data(words[2].utf8))
    return "sent"
  case "mreceive":
    let receiver = try container.mailbox(words[1]).receiver()
    let (log, batchSize) = (words[2], Int(words[3])!)
    receiving.append(
      Task.detached {
        do {
          while true {
            let batch = try await receiver.receive(TestMessage.self, limit: batchSize)
            append(batch.map { "\($0.payload.sender) \($0.payload.n)\n" }.joined(), to: log)
            try receiver.acknowledge(batch)
            append("acked\n", to: log)
          }
        } catch {
          append("error \(error)\n", to: log)
        }
      })
    return "receiving"
  case "mreceiver":
    receivers[words[1]] = try container.mailbox(words[1]).receiver()
    return "receiver"
  case "mcount":
    return String(try container.mailbox(words[1]).count())
  case "counts":
    let (descriptors, threads) = counts()
    return "\(descriptors) \(threads)"
  case "suspend":
    container.suspend()
    return "suspended"
  case "resume":
    try container.resume()
    return "resumed"
  case "host-handler":
    var action = sigaction()
    #if os(Linux)
      action.__sigaction_handler.sa_handler = { _ in }
    #else
      action.__sigaction_u.__sa_handler = { _ in }
    #endif
    sigemptyset(&action.sa_mask)
    action.sa_flags = SA_RESTART
    guard sigaction(InterruptSignal.number, &action, nil) == 0 else { return "sigaction failed: errno \(errno)" }
    return "installed"
  case "timedlock":
    let lock = try container.lock(words[1])
    let timeout = Duration.milliseconds(Int(words[2])!)
    let outcome = blocking { () -> Result<LockGuard, LiaisonError> in
      do {
        return .success(try await lock.lock(timeout: timeout))
      } catch {
        return .failure(error as! LiaisonError)
      }
    }
    switch outcome {
    case .success(let held):
      guards[words[1]] = held
      return "locked"
    case .failure(let error) where error.code == .timedOut:
      return "timedOut"
    case .failure(let error):
      throw error
    }
  case "die-before-ring":  // the next commit of defaults or of a database kills this process before it rings
    StoreTestHooks.beforeRing.withLock {
      $0 = {
        kill(getpid(), SIGKILL)
        while true { pause() }  // another thread may take the signal: this one goes no further
      }
    }
    return "armed"
  default:
    return "unknown command"
  }
}

@Sendable func counts() -> (Int, Int) {
  func entries(_ path: String) -> Int {
    guard let directory = opendir(path) else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count - 3  // ".", "..", and the descriptor opendir itself holds or the reading thread
  }
  return (entries("/proc/self/fd"), entries("/proc/self/task"))
}

/// Runs `body` in a task and waits for it on this (non-pool) thread.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
  let result = Locked<T?>(nil)
  let done = DispatchSemaphore(value: 0)
  Task {
    let value = await body()
    result.withLock { $0 = value }
    done.signal()
  }
  done.wait()
  return result.withLock { $0! }
}

/// Whether this process has a `flock` wait asleep in the kernel.
@Sendable func blockedInKernel() -> Bool {
  (try? KernelLocks.hasBlockedWaiter(pid: getpid())) ?? false
}

/// `count` zero-timeout waits refused on a suspended container, then the CPU time this process
/// uses in the next 300 ms of idling (a refused wait must leave nothing running).
func suspendedWaits(_ lock: ProcessLock, count: Int) -> String {
  container.suspend()
  defer { try? container.resume() }
  let refused = blocking { () -> Int in
    var refused = 0
    for _ in 0..<count {
      do {
        _ = try await lock.lock(timeout: .zero)
      } catch let error as LiaisonError where error.code == .suspended {
        refused += 1
      } catch {}
    }
    return refused
  }
  func cpuMilliseconds() -> Double {
    var usage = rusage()
    #if os(Linux)
      getrusage(RUSAGE_SELF.rawValue, &usage)  // an enum in Glibc
    #else
      getrusage(RUSAGE_SELF, &usage)  // an Int32 on Apple platforms
    #endif
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000
      + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
  }
  let before = cpuMilliseconds()
  usleep(300_000)
  return "suspended=\(refused) idle-cpu-ms=\(cpuMilliseconds() - before)"
}

/// Starts and ends an async sequence (by cancelling its task while it waits) and a callback
/// observation on `signal`, and reports the descriptor and thread counts before and after.
func signalResidue(_ signal: Signal) -> String {
  func cycle() {
    let ready = DispatchSemaphore(value: 0)
    let task = Task {
      guard let notes = try? signal.notifications() else { return }
      ready.signal()
      for await _ in notes {}
    }
    ready.wait()
    task.cancel()
    blocking { await task.value }
    let observation = try? signal.observe(on: observerQueue) { _ in }
    observation?.cancel()
  }
  cycle()  // warm up the runtime's lazily started threads
  let before = counts()
  for _ in 0..<3 { cycle() }
  let after = counts()
  let liaisonThreads = threadNames().filter { $0.hasPrefix("liaison-") }.count
  return "\(before.0) \(before.1) \(after.0) \(after.1) liaison-threads=\(liaisonThreads)"
}

/// The names of this process's threads.
func threadNames() -> [String] {
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.compactMap {
    (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
      .trimmingCharacters(in: .whitespacesAndNewlines)
  }
}

/// Watches `presence` while a short lease on it lapses (the watch's expiry deadline, a one-shot,
/// fires), ends the watch, and reports how many of Liaison's threads are left.
func lapseResidue(_ presence: Presence) throws -> String {
  let watching = DispatchSemaphore(value: 0)
  let sawRelease = DispatchSemaphore(value: 0)
  // The sequence lives in the task only, so that it is released when the task ends.
  let task = Task.detached {
    guard let changes = try? presence.changes() else { return }
    watching.signal()
    var claimed = false
    for try await change in changes {
      if case .claimed = change { claimed = true }
      if case .released = change, claimed { break }
    }
    sawRelease.signal()
  }
  watching.wait()
  let lease = try presence.lease(for: .milliseconds(30))
  // Stop renewing without releasing: suspend stops the heartbeat's renewals.
  container.suspend()
  _ = sawRelease.wait(timeout: .now() + 10)
  try container.resume()
  lease.release()
  task.cancel()
  blocking { _ = await task.result }
  return "liaison-threads=\(threadNames().filter { $0.hasPrefix("liaison-") }.count)"
}

func residue(_ lock: ProcessLock) -> String {
  @Sendable func timedOut() async -> String {
    do {
      _ = try await lock.lock(timeout: .milliseconds(50))
      return "acquired"
    } catch let error as LiaisonError {
      return "\(error.code)".replacingOccurrences(of: " ", with: "-")
    } catch {
      return "other"
    }
  }
  @Sendable func cancelled() async -> String {
    let waiter = Task { () -> String in
      do {
        _ = try await lock.lock(timeout: nil)
        return "acquired"
      } catch is CancellationError {
        return "CancellationError"
      } catch {
        return "other"
      }
    }
    // Cancel once the wait is asleep in the kernel, so that the blocked wait itself is interrupted.
    let deadline = DispatchTime.now() + .seconds(5)
    while !blockedInKernel() && DispatchTime.now() < deadline { usleep(50) }
    waiter.cancel()
    return await waiter.value
  }
  // Warm up, so that threads the runtime starts lazily exist before counting.
  _ = blocking { await timedOut() }
  _ = blocking { await cancelled() }
  let before = counts()
  let timeoutResult = blocking { await timedOut() }
  let cancelResult = blocking { await cancelled() }
  let after = counts()
  return "\(before.0) \(before.1) \(after.0) \(after.1) timedOut=\(timeoutResult) cancelled=\(cancelResult)"
}

say("ready \(getpid())")
while let line = readLine() {
  let words = line.split(separator: " ").map(String.init)
  guard !words.isEmpty else { continue }
  do {
    say("ok \(try run(words))")
  } catch let error as LiaisonError {
    say("error \(error.code): \(error.message)")
  } catch {
    say("error \(error)")
  }
}
