// The peer's mailbox commands on any backend: the same commands on a folder's `Mailbox` and on a
// `PostgresMailbox`, so that one test checks both (see PlaceCommands.swift for how the peer's
// argument chooses the backend).

import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport

#if Postgres
  import LiaisonPostgres
#endif

@MainActor private var placeReceivers: [String: PlaceReceiver] = [:]
@MainActor private var placeReceiving: [Task<Void, Never>] = []

/// A mailbox of the peer's place, whichever backend: what the commands need of it.
private struct PlaceMailbox: Sendable {
  let send: @Sendable (TestMessage, String) async throws -> Void
  let sendAll: @Sendable ([TestMessage]) async throws -> Void
  let count: @Sendable () async throws -> Int
  /// Becomes the receiver; waits up to `timeout` for another receiver to end (zero: not at all).
  let receiver: @Sendable (_ timeout: Duration) async throws -> PlaceReceiver

  init(_ name: String, sender: String) throws {
    #if Postgres
      if let postgres = place as? PostgresContainer {
        let mailbox = try awaiting { try await postgres.mailbox(name, sender: sender) }
        send = { _ = try await mailbox.send($0, id: $1) }
        sendAll = { _ = try await mailbox.sendAll($0) }
        count = { try await mailbox.count() }
        receiver = { timeout in
          let receiver = try await mailbox.receiver(timeout: timeout)
          return PlaceReceiver(
            receive: { try await receiver.receive(TestMessage.self, limit: $0) },
            acknowledge: { try await receiver.acknowledge($0) }, keep: receiver)
        }
        return
      }
    #endif
    let mailbox = try container.mailbox(name, sender: sender)
    send = { try await mailbox.send($0, id: $1) }
    sendAll = { try await mailbox.sendAll($0) }
    count = { try mailbox.count() }
    receiver = { timeout in
      // A folder's receive lock comes free when its holder's process ends: nothing to wait for.
      let receiver = try mailbox.receiver()
      return PlaceReceiver(
        receive: { try await receiver.receive(TestMessage.self, limit: $0) },
        acknowledge: { try await receiver.acknowledge($0) }, keep: receiver)
    }
  }
}

private struct PlaceReceiver: Sendable {
  let receive: @Sendable (Int) async throws -> [MailboxEnvelope<TestMessage>]
  let acknowledge: @Sendable ([MailboxEnvelope<TestMessage>]) async throws -> Void
  /// The receiver itself, kept alive as long as this.
  let keep: any Sendable
}

let placeMailboxCommands: [PeerCommandHandler] = [
  PeerCommandHandler(
    .placeMsend,
    "MAILBOX SENDER COUNT [BATCH]   COUNT sends of {sender, n: 0…COUNT-1}: one at a time with ids SENDER-n, or in "
      + "sendAll batches of BATCH → ok sent"
  ) { words in
    let mailbox = try PlaceMailbox(words[1], sender: words[2])
    let (sender, count) = (words[2], Int(words[3])!)
    let batch = words.count > 4 ? Int(words[4])! : 0
    try awaiting {
      if batch > 0 {
        for start in stride(from: 0, to: count, by: batch) {
          try await mailbox.sendAll((start..<min(count, start + batch)).map { TestMessage(sender: sender, n: $0) })
        }
      } else {
        for n in 0..<count { try await mailbox.send(TestMessage(sender: sender, n: n), "\(sender)-\(n)") }
      }
    }
    return "sent"
  },
  PeerCommandHandler(
    .placeMreceive,
    """
    MAILBOX LOG BATCH [noack] [WAIT-MS]   becomes the receiver, waiting up to WAIT-MS for another to end \
    (→ ok receiving MONOTONIC-NS-WHEN-ASKED), then for ever: waits for up to BATCH messages, appends \
    "SENDER N MONOTONIC-NS" per message to LOG in one write, and acknowledges them (unless noack), appending "acked"
    """
  ) { words in
    let askedAt = monotonicNanoseconds()
    let mailbox = try PlaceMailbox(words[1], sender: "receiver")
    let (log, batchSize) = (words[2], Int(words[3])!)
    let acknowledging = !words.contains("noack")
    let wait = words.count > 4 ? Int(words.last!).map { Duration.milliseconds($0) } ?? .zero : .zero
    let receiver = try awaiting { try await mailbox.receiver(wait) }
    placeReceivers[words[1]] = receiver
    placeReceiving.append(
      Task.detached {
        do {
          while true {
            let batch = try await receiver.receive(batchSize)
            let at = monotonicNanoseconds()
            append(batch.map { "\($0.payload.sender) \($0.payload.n) \(at)\n" }.joined(), to: log)
            if acknowledging {
              try await receiver.acknowledge(batch)
              append("acked\n", to: log)
            }
          }
        } catch {
          append("error \(error)\n", to: log)
        }
      })
    return "receiving \(askedAt)"
  },
  PeerCommandHandler(.placeMcount, "MAILBOX  → ok N (messages waiting)") { words in
    let mailbox = try PlaceMailbox(words[1], sender: "counter")
    return String(try awaiting { try await mailbox.count() })
  },
]
