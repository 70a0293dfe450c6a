// The peer's commands on mailboxes.

import Foundation
import Liaison
import LiaisonStore

@MainActor private var receivers: [String: MailboxReceiver] = [:]
@MainActor private var receiving: [Task<Void, Never>] = []

/// What `msend` sends and `mreceive` receives.
struct TestMessage: Codable, Sendable {
  let sender: String
  let n: Int
}

let mailboxCommands: [PeerCommandHandler] = [
  PeerCommandHandler(
    .msend,
    "MAILBOX SENDER COUNT   COUNT sends, one at a time, of {sender, n: 0…COUNT-1} with ids SENDER-n → ok sent"
  ) { words in
    let mailbox = try container.mailbox(words[1], sender: words[2])
    for n in 0..<Int(words[3])! {
      try mailbox.send(TestMessage(sender: words[2], n: n), id: "\(words[2])-\(n)")
    }
    return "sent"
  },
  PeerCommandHandler(.msendid, "MAILBOX ID TEXT   one send of the string TEXT with id ID → ok ID") { words in
    try container.mailbox(words[1]).send(words[3], id: words[2]).id
  },
  PeerCommandHandler(.msendraw, "MAILBOX TEXT   one send of TEXT's bytes as Data → ok sent") { words in
    try container.mailbox(words[1]).send(Data(words[2].utf8))
    return "sent"
  },
  PeerCommandHandler(
    .mreceive,
    """
    MAILBOX LOG BATCH   becomes the receiver (→ ok receiving), then for ever: waits for up to BATCH \
    messages, appends "SENDER N" per message to LOG in one write, acknowledges them, appends "acked"
    """
  ) { words in
    let receiver = try container.mailbox(words[1]).receiver()
    let (log, batchSize) = (words[2], Int(words[3])!)
    receiving.append(
      Task.detached {
        do {
          while true {
            let batch = try await receiver.receive(TestMessage.self, limit: batchSize)
            append(batch.map { "\($0.payload.sender) \($0.payload.n)\n" }.joined(), to: log)
            try await receiver.acknowledge(batch)
            append("acked\n", to: log)
          }
        } catch {
          append("error \(error)\n", to: log)
        }
      })
    return "receiving"
  },
  PeerCommandHandler(.mreceiver, "MAILBOX   becomes the receiver and stays it → ok receiver") { words in
    receivers[words[1]] = try container.mailbox(words[1]).receiver()
    return "receiver"
  },
  PeerCommandHandler(.mrequeue, "MAILBOX [ID…]   requeues the quarantined messages (those ids only) → ok N") { words in
    String(try container.mailbox(words[1]).requeueQuarantined(ids: words.count > 2 ? Array(words[2...]) : nil))
  },
  PeerCommandHandler(.mcount, "MAILBOX  → ok N (messages waiting)") { words in
    String(try container.mailbox(words[1]).count())
  },
  PeerCommandHandler(.mpeek, "MAILBOX  → ok N ID… (the messages waiting, not received)") { words in
    let entries = try container.mailbox(words[1]).peek()
    return ([String(entries.count)] + entries.map(\.id)).joined(separator: " ")
  },
]
