// What the scenarios do that is the same on a folder and on PostgreSQL, written once over the
// coordination protocols (`CoordinationStore` and its parts): the measured operation of a sample,
// and the peers' loops. What stays per backend is the opening of the place and of its parts (a
// peer's arguments), the floors (raw system calls and raw SQLite; raw SQL on bare connections),
// and what measures the folder's synchronous forms, which PostgreSQL does not have.
//
// On the folder these call the protocols' `async` forms, through `blocking` (a task, and this
// thread waiting for it), where the folder's scenarios called its synchronous forms before. Each
// was measured both ways, interleaved in the same runs (three runs, 2-core machine): within the
// noise for `defaults.set` (timed inside the task: sync/async 0.82–1.08×), `defaults.visibility`
// (0.97–1.02×), `mailbox.latency` (0.97–1.06×) and `mailbox.throughput` (1.02×), so those are
// written once here. Not for `defaults.get` (the async form through a task: 1.56× the sync read,
// on a path of about 100 ns) nor for the lock holder peer of `lock.handoff` (the loop in one task:
// 1.4–3.0 µs more per handoff than the blocking holder, which measured 0.73–0.87× it), so those stay
// per backend, as do the signal's scenarios and observer (see SignalScenarios.swift).
//
// Each generic function here is called with one concrete type per backend in this module, so the
// optimiser specialises it: no call goes through a witness table on a measured path.

import Foundation
import Liaison

enum PlaceScenarios {
  // MARK: - Samples: the measuring side

  /// One sample of a lock's handoff: asks `holder` to take the lock (`g`, answered `h` once
  /// held), runs `waitForLock` (which returns the time it got the lock), and returns the time
  /// since the holder's release, in nanoseconds.
  static func handoff(from holder: BenchPeer, _ waitForLock: () throws -> UInt64) rethrows -> Double {
    holder.send(UInt8(ascii: "g"))
    precondition(holder.readByte() == UInt8(ascii: "h"))
    let acquiredAt = try waitForLock()
    let releasedAt = holder.readTimestamp()
    return Double(Int64(bitPattern: acquiredAt &- releasedAt))
  }

  /// Waits for `lock` (`await lock(.exclusive, timeout: nil)`), releases it, and returns when it
  /// got it: the waiting side of ``handoff(from:_:)`` in the async form.
  static func acquire(_ lock: some CoordinationLock) async throws -> UInt64 {
    let held = try await lock.lock(.exclusive, timeout: nil)
    let acquiredAt = now()
    await held.unlock()
    return acquiredAt
  }

  /// One sample of `set`, `batch` times, in nanoseconds per `set`, timed inside the task (the
  /// wake-ups of ``blocking(_:)`` are not counted). `value` gives each `set`'s value.
  static func defaultsSet<Value>(
    _ defaults: some CoordinationDefaults, _ key: DefaultsKey<Value>, batch: Int, value: @escaping @Sendable () -> Value
  ) -> () throws -> Double {
    { try blocking { try await timeBatchAsync(batch) { try await defaults.set(value(), for: key, timeout: nil) } } }
  }

  /// One sample of a value's visibility: a `set` of the time, and the time until `observer`, in
  /// another process following the key (``observe(_:_:output:keeping:)``), had it.
  static func defaultsVisibility<Value: FixedWidthInteger & Codable & Sendable>(
    _ defaults: some CoordinationDefaults, _ key: DefaultsKey<Value>, _ observer: BenchPeer
  ) -> () throws -> Double {
    {
      try blocking { try await defaults.set(Value(truncatingIfNeeded: now()), for: key, timeout: nil) }
      return Double(observer.readTimestamp())
    }
  }

  /// One sample of a mailbox's latency: a send whose payload is the time of the send, and the
  /// time until `receiver` (``receive(_:mode:output:keeping:)``, `latency`) had it; then waits
  /// for its acknowledgement (outside the measured time), so that none overlaps the next send.
  static func mailboxLatency(_ mailbox: some CoordinationMailbox, _ receiver: BenchPeer) -> () throws -> Double {
    {
      _ = try blocking { try await mailbox.send(now(), id: nil, timeout: nil) }
      let latency = receiver.readTimestamp()
      _ = receiver.readByte()  // acknowledged
      return Double(latency)
    }
  }

  /// One sample of a mailbox's throughput, in messages per second: `batches` × `sendAll(batch)`,
  /// from the first send until `receiver` (``receive(_:mode:output:keeping:)``, `throughput`)
  /// has acknowledged the last message.
  static func mailboxThroughput(
    _ mailbox: some CoordinationMailbox, _ receiver: BenchPeer, batch: [BenchMessage], batches: Int
  ) -> () throws -> Double {
    {
      let start = now()
      try blocking {
        for _ in 0..<batches { _ = try await mailbox.sendAll(batch, timeout: nil) }
      }
      let end = receiver.readTimestamp()
      return Double(batch.count * batches) / (Double(end - start) / 1e9)
    }
  }

  // MARK: - Peers: the other process

  /// The defaults observer peer: follows `key` (`changes(of:)`, subscribed before the peer says
  /// it is ready) and answers each new value with the time since it was set (the value is that
  /// time).
  static func observe<Value: FixedWidthInteger & Codable & Sendable>(
    _ defaults: some CoordinationDefaults, _ key: DefaultsKey<Value>, input: CInt, output: CInt,
    keeping place: some Sendable
  ) throws -> Never {
    let changes = try blocking { try await defaults.changes(of: key) }
    Task.detached {
      var first = true
      for try await value in changes {
        if first {  // the value when the subscription began
          first = false
          continue
        }
        writeBytes(output, encodeTimestamp(now() &- UInt64(truncatingIfNeeded: value ?? 0)))
      }
      withExtendedLifetime(place) {}
    }
    serveUntilInputCloses(input: input, output: output)
  }

  /// The mailbox receiver peer. `latency`: answers each message with the time since its send (its
  /// payload), acknowledges it, then writes one byte. `throughput COUNT`: receives batches of
  /// ``batchSize``, acknowledges each, and answers the time at which each COUNT-th message was
  /// acknowledged.
  static func receive(
    _ receiver: some CoordinationReceiver, mode: [String], input: CInt, output: CInt, keeping place: some Sendable
  ) -> Never {
    Task.detached {
      do {
        if mode.first == "latency" {
          for try await envelope in receiver.messages(UInt64.self) {
            writeBytes(output, encodeTimestamp(now() &- envelope.payload))
            try await receiver.acknowledge([envelope], timeout: nil)
            writeBytes(output, [UInt8(ascii: "a")])
          }
        } else {
          let count = Int(mode[1])!
          var received = 0
          while true {
            let batch = try await receiver.receive(BenchMessage.self, limit: batchSize, timeout: nil)
            try await receiver.acknowledge(batch, timeout: nil)
            received += batch.count
            if received >= count {
              received -= count
              writeBytes(output, encodeTimestamp(now()))
            }
          }
        }
      } catch {
        fatalError("the receiver failed: \(error)")
      }
      withExtendedLifetime(place) {}
    }
    serveUntilInputCloses(input: input, output: output)
  }

  /// Messages per `sendAll` and per `receive` in the throughput scenarios.
  static let batchSize = 100
}

/// A peer's last step: says it is ready (`r`), then waits for its input to close, which ends the
/// process, while its threads and tasks do the work.
func serveUntilInputCloses(input: CInt, output: CInt) -> Never {
  writeBytes(output, [UInt8(ascii: "r")])
  _ = readBytes(input, 1)  // ends the process when the input closes
  fatalError("unreachable")
}

/// Times `operations` runs of `body` and returns nanoseconds per operation.
func timeBatchAsync(_ operations: Int, _ body: () async throws -> Void) async rethrows -> Double {
  let start = now()
  for _ in 0..<operations { try await body() }
  return Double(now() - start) / Double(operations)
}
