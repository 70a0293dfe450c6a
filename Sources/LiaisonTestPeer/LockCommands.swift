// The peer's commands on process locks, and on what a wait leaves behind.

import Dispatch
import Foundation
import Liaison
import LiaisonTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The locks this peer holds, by name.
@MainActor var guards: [String: LockGuard] = [:]

let lockCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.lock, "NAME [shared]   blocking lock → ok locked") { words in
    guards[words[1]] = try container.lock(words[1]).lock(mode(words))
    return "locked"
  },
  PeerCommandHandler(.trylock, "NAME [shared]  → ok locked | ok busy") { words in
    guard let held = try container.lock(words[1]).tryLock(mode(words)) else { return "busy" }
    guards[words[1]] = held
    return "locked"
  },
  PeerCommandHandler(.trylockRepeatedly, "NAME COUNT   COUNT times: tryLock, unlock → ok BUSY-COUNT busy") { words in
    let lock = try container.lock(words[1])
    var busy = 0
    for _ in 0..<Int(words[2])! {
      if let held = try lock.tryLock() { held.unlock() } else { busy += 1 }
    }
    return "\(busy) busy"
  },
  PeerCommandHandler(.token, "NAME   the fencing token of the lock held → ok TOKEN") { words in
    guard let held = guards[words[1]] else { return "not held" }
    return "\(try held.fencingToken())"
  },
  PeerCommandHandler(.unlock, "NAME  → ok unlocked") { words in
    guards.removeValue(forKey: words[1])?.unlock()
    return "unlocked"
  },
  PeerCommandHandler(.waitlock, "NAME sync|async   blocking or async lock → ok locked MONOTONIC-NS-WHEN-TAKEN") {
    words in
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
  },
  PeerCommandHandler(
    .increment,
    """
    NAME FILE COUNT LOG   COUNT times: lock, read the number in FILE, write it + 1, unlock; appends \
    "enter exit" (monotonic ns) per hold to LOG → ok done
    """
  ) { words in
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
  },
  PeerCommandHandler(.timedlock, "NAME MILLISECONDS   async lock with that timeout → ok locked | ok timedOut") {
    words in
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
  },
  PeerCommandHandler(
    .residue,
    """
    NAME   with NAME held elsewhere: a timed-out async wait and a cancelled one, with this process's \
    descriptor and Liaison thread counts before and after → ok FDS THREADS FDS THREADS timedOut=CODE cancelled=TYPE
    """
  ) { words in
    residue(try container.lock(words[1]))
  },
  PeerCommandHandler(
    .suspendedWaits,
    """
    NAME COUNT   COUNT zero-timeout waits refused on a suspended container, then the CPU time of \
    300 ms of idling → ok suspended=N idle-cpu-ms=MS
    """
  ) { words in
    suspendedWaits(try container.lock(words[1]), count: Int(words[2])!)
  },
  PeerCommandHandler(
    .holdlock,
    "FOLDER NAME   holds Liaison's own lock NAME in .liaison/FOLDER (store defaults.write); unlock FOLDER/NAME → ok locked"
  ) { words in
    guard let named = ContainerLayout.Folder(rawValue: words[1]) else {
      throw LiaisonError(.invalidArgument, "no folder '\(words[1])' in .liaison (ContainerLayout.Folder)")
    }
    let folder = try container.privateFolder(named)
    guards[words[1] + "/" + words[2]] = try ProcessLock(
      name: try LiaisonName(words[2]), folder: folder, container: container
    ).lock()
    return "locked"
  },
]

private func mode(_ words: [String]) -> LockMode {
  words.count > 2 && words[2] == "shared" ? .shared : .exclusive
}

/// Adds one to the decimal number in `path` (a missing or empty file counts as 0).
private func incrementFile(_ path: String) {
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

/// `count` zero-timeout waits refused on a suspended container, then the CPU time this process
/// uses in the next 300 ms of idling (a refused wait must leave nothing running).
private func suspendedWaits(_ lock: ProcessLock, count: Int) -> String {
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

private func residue(_ lock: ProcessLock) -> String {
  @Sendable func timedOut() async -> String {
    do {
      _ = try await lock.lock(timeout: .milliseconds(50))
      return "acquired"
    } catch {
      return "\(error.code)".replacingOccurrences(of: " ", with: "-")
    }
  }
  @Sendable func cancelled() async -> String {
    let waiter = Task { () -> String in
      do {
        _ = try await lock.lock(timeout: nil)
        return "acquired"
      } catch let error as LiaisonError where error.code == .cancelled {
        return "cancelled"
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
  // Liaison's own threads (named liaison-…): Dispatch and the cooperative pool start and keep
  // workers of their own as they see fit, more so under a sanitizer.
  func liaisonThreads() -> Int { threadNames().filter { $0.hasPrefix("liaison-") }.count }
  let before = (counts().0, liaisonThreads())
  let timeoutResult = blocking { await timedOut() }
  let cancelResult = blocking { await cancelled() }
  let after = (counts().0, liaisonThreads())
  return "\(before.0) \(before.1) \(after.0) \(after.1) timedOut=\(timeoutResult) cancelled=\(cancelResult)"
}
