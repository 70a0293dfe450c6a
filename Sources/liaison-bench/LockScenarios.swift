import Dispatch
import Foundation
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

enum LockScenarios {
  /// `lock.uncontended`: `lock()` + `unlock()` with nobody else around, against `floor.flock`.
  static func uncontended(_ container: SharedContainer) throws -> ScenarioResult {
    let lock = try container.lock("bench-uncontended")
    let batch = 200
    let floor = Floor.flockPair(path: container.directory + "/floor-flock", batch: batch)
    let samples = try interleave(
      samples: 300,
      [
        { try timeBatch(batch) { try lock.lock().unlock() } },
        floor,
      ])
    return ScenarioResult(
      measurement: Measurement("lock.uncontended", samples[0]), unit: "ns",
      baselines: [Measurement("floor.flock", samples[1])],
      target: "≤ 1.5× floor.flock")
  }

  /// `lock.handoff`: a holder in another process releases; the time until the waiter here (a
  /// thread blocked in `lock()`) runs. `lock.handoff.async` is the same with `await lock(timeout:)`,
  /// against `floor.pipe-to-async` too.
  static func handoff(_ container: SharedContainer) throws -> [ScenarioResult] {
    let lock = try container.lock("bench-handoff")
    let holder = try BenchPeer("lock-holder", [container.directory, "bench-handoff"])
    let pipe = try Floor.pipeHalfRoundTrip()
    let pipeToAsync = try Floor.pipeToAsync()

    let samples = try interleave(
      samples: 400,
      [
        {
          try PlaceScenarios.handoff(from: holder) {
            let held = try lock.lock()
            defer { held.unlock() }
            return now()
          }
        },
        { try PlaceScenarios.handoff(from: holder) { try blocking { try await PlaceScenarios.acquire(lock) } } },
        pipe,
        pipeToAsync,
      ])
    let floor = Measurement("floor.pipe-half-rtt", samples[2])
    let asyncFloor = Measurement("floor.pipe-to-async", samples[3])
    let seed = Measurement("seed.lockfile-backoff", try seedHandoff(directory: container.directory, samples: 8))
    return [
      ScenarioResult(
        measurement: Measurement("lock.handoff", samples[0]), unit: "ns", baselines: [floor, seed],
        target: "p50 ≤ 3× floor.pipe-half-rtt, p99 ≤ 1 ms"),
      ScenarioResult(
        measurement: Measurement("lock.handoff.async", samples[1]), unit: "ns",
        baselines: [asyncFloor, floor, seed],
        target: "(informational: the async form, resumed on Swift's cooperative pool)"),
    ]
  }

  /// `seed.lockfile-backoff`: the lock people write today — create the file to lock, delete it
  /// to unlock, retry with a 0.2 s backoff doubling to 3.2 s — handed over the same way.
  static func seedHandoff(directory: String, samples: Int) throws -> [Double] {
    let path = directory + "/seed.lock"
    let holder = try BenchPeer("seed-holder", [path])
    return (0..<samples).map { _ in
      holder.send(UInt8(ascii: "g"))
      precondition(holder.readByte() == UInt8(ascii: "h"))
      var backoff: UInt32 = 200_000
      while true {
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if fd >= 0 {
          let acquiredAt = now()
          close(fd)
          unlink(path)
          return Double(acquiredAt - holder.readTimestamp())
        }
        usleep(backoff)
        backoff = min(backoff * 2, 3_200_000)
      }
    }
  }

  /// The holder peer: on `g`, takes the lock, answers `h`, waits until the waiter is asleep in
  /// the kernel, then releases and sends the time of release. The folder's own, blocking form:
  /// the same loop in one task, over the protocol (as PostgreSQL's holder), made each handoff
  /// 1.4–3.0 µs slower (PlaceScenarios.swift), on a figure of about 10 µs.
  static func holdAndRelease(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let lock = try SharedContainer(directory: container, createIfMissing: true).lock(name)
    writeBytes(output, [UInt8(ascii: "r")])
    while true {
      _ = readBytes(input, 1)
      let held = try lock.lock()
      writeBytes(output, [UInt8(ascii: "h")])
      waitForBlockedWaiters()
      let releasedAt = now()
      held.unlock()
      writeBytes(output, encodeTimestamp(releasedAt))
    }
  }

  /// The seed holder: on `g`, creates the lock file, answers `h`, holds it 2 ms (so the waiter
  /// has started its backoff), deletes it and sends the time of release.
  static func seedHoldAndRelease(path: String, input: CInt, output: CInt) -> Never {
    writeBytes(output, [UInt8(ascii: "r")])
    while true {
      _ = readBytes(input, 1)
      var fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
      while fd < 0 {
        usleep(1_000)
        fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
      }
      close(fd)
      writeBytes(output, [UInt8(ascii: "h")])
      usleep(2_000)
      let releasedAt = now()
      unlink(path)
      writeBytes(output, encodeTimestamp(releasedAt))
    }
  }
}

/// Runs `body` in a task and waits for it on this thread (never a thread of the pool).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
  let result = Locked<Result<T, any Error>?>(nil)
  let done = DispatchSemaphore(value: 0)
  Task {
    let outcome: Result<T, any Error>
    do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
    result.withLock { $0 = outcome }
    done.signal()
  }
  done.wait()
  return try result.withLock { $0! }.get()
}
