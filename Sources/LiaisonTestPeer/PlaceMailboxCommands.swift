// The peer's mailbox commands on any backend, through `CoordinationMailbox` alone: the same
// commands on a folder's `Mailbox` and on a `PostgresMailbox`, so that one test checks both (see
// PlaceCommands.swift for how the peer's argument chooses the backend).

import Foundation
import Liaison
import LiaisonTestSupport

/// The receivers the peer has become, kept alive (a receiver dropped is closed) by mailbox.
@MainActor private var placeReceivers: [String: any CoordinationReceiver] = [:]
@MainActor private var placeReceiving: [Task<Void, Never>] = []

/// The mailbox `name` of the peer's place, whichever backend, through the protocol alone.
private func placeMailbox(_ name: String, sender: String) throws -> any CoordinationMailbox {
  try awaiting { try await place.mailbox(name, sender: sender) as any CoordinationMailbox }
}

let placeMailboxCommands: [PeerCommandHandler] = [
  PeerCommandHandler(
    .placeMsend,
    "MAILBOX SENDER COUNT [BATCH]   COUNT sends of {sender, n: 0…COUNT-1}: one at a time with ids SENDER-n, or in "
      + "sendAll batches of BATCH → ok sent"
  ) { words in
    let mailbox = try placeMailbox(words[1], sender: words[2])
    let (sender, count) = (words[2], Int(words[3])!)
    let batch = words.count > 4 ? Int(words[4])! : 0
    try awaiting {
      if batch > 0 {
        for start in stride(from: 0, to: count, by: batch) {
          _ = try await mailbox.sendAll(
            (start..<min(count, start + batch)).map { TestMessage(sender: sender, n: $0) }, timeout: nil)
        }
      } else {
        for n in 0..<count {
          _ = try await mailbox.send(TestMessage(sender: sender, n: n), id: "\(sender)-\(n)", timeout: nil)
        }
      }
    }
    return "sent"
  },
  PeerCommandHandler(
    .placeMreceive,
    """
    MAILBOX LOG BATCH [noack] [retry] [WAIT-MS]   becomes the receiver, waiting up to WAIT-MS for another to end \
    (→ ok receiving MONOTONIC-NS-WHEN-ASKED), then for ever: waits for up to BATCH messages, appends \
    "SENDER N MONOTONIC-NS" per message to LOG in one write, and acknowledges them (unless noack), appending \
    "acked"; with retry, a wait that finds no server (a failover under way) appends "unavailable" and waits again
    """
  ) { words in
    let askedAt = monotonicNanoseconds()
    let mailbox = try placeMailbox(words[1], sender: "receiver")
    let (log, batchSize) = (words[2], Int(words[3])!)
    let acknowledging = !words.contains("noack")
    let retrying = words.contains("retry")
    let wait = words.count > 4 ? Int(words.last!).map { Duration.milliseconds($0) } ?? .zero : .zero
    let receiver = try awaiting { try await mailbox.receiver(timeout: wait) as any CoordinationReceiver }
    placeReceivers[words[1]] = receiver
    placeReceiving.append(
      Task.detached {
        do {
          while true {
            let batch: [MailboxEnvelope<TestMessage>]
            do {
              batch = try await receiver.receive(TestMessage.self, limit: batchSize, timeout: nil)
            } catch let error as LiaisonError where retrying && error.code == .unavailable {
              append("unavailable\n", to: log)
              try? await Task.sleep(for: .milliseconds(100))  // paces the tries; nothing waits for it
              continue
            }
            let at = monotonicNanoseconds()
            append(batch.map { "\($0.payload.sender) \($0.payload.n) \(at)\n" }.joined(), to: log)
            if acknowledging {
              try await receiver.acknowledge(batch, timeout: nil)
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
    let mailbox = try placeMailbox(words[1], sender: "counter")
    return String(try awaiting { try await mailbox.count() })
  },
]
