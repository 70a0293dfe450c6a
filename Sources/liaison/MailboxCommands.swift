import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine
import LiaisonStore

extension MailboxPayload {
  var isData: Bool {
    if case .data = self { true } else { false }
  }
}

/// A mailbox message as `receive` and `peek` print it.
struct MessageReport {
  let id: String
  let sentAt: Date
  let sender: String
  let payload: MailboxPayload
  var quarantineReason: String? = nil

  /// The payload as text on one line (``DefaultsCommand/oneLine(_:)``): its JSON, or
  /// `data:BASE64` for raw bytes; then the quarantine reason, if any.
  var text: String {
    // Base64 is one line of visible characters already.
    let shown = payload.isData ? shownPayload : DefaultsCommand.oneLine(shownPayload)
    return quarantineReason.map { "\(shown)\t(quarantined: \(CommandLineText.visible($0)))" } ?? shown
  }

  /// The line `peek` prints: id, sender and ``text``, separated by tabs.
  var peekLine: String {
    "\(CommandLineText.visible(id))\t\(CommandLineText.visible(sender))\t\(text)"
  }

  /// The payload as text: its JSON, or `data:BASE64` for raw bytes.
  var shownPayload: String {
    switch payload {
    case .json(let json): DefaultsCommand.show(.json(json))
    case .data(let data): DefaultsCommand.show(.data(data))
    }
  }

  /// One line of JSON with sorted keys: id, sentAt, sender, payload (the JSON itself, or the
  /// string `data:BASE64`), and quarantineReason when quarantined.
  func jsonLine() throws -> String {
    var object: [String: Any] = [
      "id": id, "sentAt": sentAt.formatted(.iso8601), "sender": sender, "payload": shownPayload,
    ]
    if case .json(let json) = payload,
      let value = try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])
    {
      object["payload"] = value
    }
    if let quarantineReason { object["quarantineReason"] = quarantineReason }
    let data = try JSONSerialization.data(
      withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
    return String(decoding: data, as: UTF8.self)
  }
}

struct SendCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "send",
    abstract: "Send a message to a mailbox; its receiver need not be running.",
    discussion: """
      The message is JSON, or else a plain string: `liaison send inbox hello` and \
      `liaison send inbox '"hello"'` send the same string. With --id, sending the same id again \
      stores nothing (the id of a message acknowledged in the last 7 days included). Prints the \
      message's id.

      \(DocsPage.mailbox)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The mailbox's name.") var mailbox: String
  @Argument(help: "The message: JSON, or else taken as a plain string; - reads it from standard input.")
  var message: String
  @Option(help: "The message's id (1 to 256 bytes), which makes a retried send store nothing.") var id: String?
  @Option(help: "The sender name the message carries.") var sender = "liaison"
  @OptionGroup var wait: StoreTimeoutOption

  func run() async throws {
    try await Self.reporting {
      let stored = try await options.withPlace(creating: true) { place in
        try await wait.waiting(forThe: "mailboxes") { timeLeft in
          let outbox = try await place.mailbox(mailbox, sender: sender, timeout: timeLeft())
          let text = try TextInput.valueOrStandardInput(message, limit: try await outbox.limits().maximumMessageSize)
          return try await outbox.sendJSON(try CommandLineValue.json(text), id: id, timeout: timeLeft()).id
        }
      }
      try printLine(CommandLineText.visible(stored))
    }
  }
}

struct ReceiveCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "receive",
    abstract: "Receive a mailbox's messages: print each, then acknowledge it.",
    discussion: """
      Prints the messages waiting now and exits; with --follow, waits for more until interrupted \
      (or until --count messages). A message is acknowledged (removed) after it is printed, so \
      one printed when the command is killed may be printed again by the next receiver. Exits \
      \(ExitStatus.busy) when the mailbox already has a receiver. When standard output cannot be \
      written (a full disk, a closed descriptor, a reader that has gone while SIGPIPE is ignored), \
      the messages not written whole stay in the mailbox, unacknowledged, and the command exits \
      \(ExitStatus.ioError).

      "Printed" means written to standard output, not read by the next program: into a pipe, \
      every message that fits in the pipe's buffer counts as printed, and `liaison receive inbox \
      | head -3` acknowledges them all. Take only what the reader will use with --count \
      (`liaison receive inbox --count 3 | ...`), or leave them with --no-ack.

      \(DocsPage.mailbox)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The mailbox's name.") var mailbox: String
  @Option(help: "Receive at most this many messages.") var count: Int?
  @Flag(
    help: """
      Hand the messages back unacknowledged: they stay in the mailbox and are delivered again to the next \
      receiver.
      """
  ) var noAck = false
  @Flag(help: "Wait for new messages instead of exiting when none are left.") var follow = false
  @Flag(help: "Print JSON lines: id, sentAt, sender, payload.") var json = false

  func validate() throws {
    if let count, count < 1 { throw ValidationError("--count takes a positive number; got \(count).") }
  }

  func run() async throws {
    try await Self.reporting {
      try await options.withPlace(creating: true) { place in
        try await receive(in: place)
      }
    }
  }

  /// Receives from the mailbox in `place` as the options say, and ends the receiver.
  private func receive<Place: CommandPlace>(in place: Place) async throws {
    let box = try await place.mailbox(mailbox, sender: ProcessInfo.processInfo.processName, timeout: nil)
    let receiver: Place.MailboxType.Receiver
    do {
      receiver = try await box.receiver()
    } catch {
      // A guard, not `catch … where`: after a typed throw, that crashes Swift 6.3.1's SIL passes.
      guard error.code == .alreadyClaimed else { throw error }
      throw CLIError(
        "The mailbox '\(mailbox)' already has a receiver (another process). Try again when it has ended.",
        status: ExitStatus.busy)
    }
    do {
      try await receive(with: receiver)
    } catch {
      await receiver.close()
      throw error
    }
    await receiver.close()
  }

  /// Prints the messages, acknowledging each batch after it is written whole unless --no-ack: a
  /// batch whose writing failed is not acknowledged, and is delivered again to the next receiver.
  private func receive(with receiver: some CommandReceiver) async throws {
    var remaining = count ?? Int.max
    while remaining > 0 {
      let batch = try await receiver.receiveStored(limit: min(remaining, 256), timeout: follow ? nil : .zero)
      if batch.isEmpty { return }
      var lines = ""
      for envelope in batch {
        let report = MessageReport(
          id: envelope.id, sentAt: envelope.sentAt, sender: envelope.sender, payload: envelope.payload)
        lines += (json ? try report.jsonLine() : report.text) + "\n"
      }
      if let failure = StandardStreams.write(Array(lines.utf8), to: 1) {
        throw StandardStreams.outputFailure(failure)
      }
      if !noAck { try await receiver.acknowledge(batch, timeout: nil) }
      remaining -= batch.count
    }
  }
}

struct PeekCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "peek",
    abstract: "Show a mailbox's messages without receiving them, quarantined ones included.",
    discussion: DocsPage.mailbox
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The mailbox's name.") var mailbox: String
  @Option(help: "Show at most this many messages.") var limit = 100
  @Flag(help: "Print JSON lines: id, sentAt, sender, payload, quarantineReason.") var json = false

  func validate() throws {
    if limit < 1 { throw ValidationError("--limit takes a positive number; got \(limit).") }
  }

  func run() async throws {
    try await Self.reporting {
      let entries = try await options.withPlace(creating: false) { place in
        let name = try LiaisonName(mailbox)
        // Opening a mailbox that does not exist would create it: there is nothing to show.
        guard try await place.mailboxes().contains(where: { $0.name == name }) else { return [MailboxEntry]() }
        return try await place.mailbox(mailbox, sender: ProcessInfo.processInfo.processName, timeout: nil)
          .peek(limit: limit)
      }
      for entry in entries {
        let report = MessageReport(
          id: entry.id, sentAt: entry.sentAt, sender: entry.sender, payload: entry.payload,
          quarantineReason: entry.quarantineReason)
        try printLine(json ? try report.jsonLine() : report.peekLine)
      }
    }
  }
}

struct RequeueCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "requeue",
    abstract: "Put a mailbox's quarantined messages back in the queue, for a receiver that can now read them.",
    discussion: """
      After an app update that reads the payloads an older version set aside. Each message goes to \
      the end of the queue and keeps its id; a running receiver is woken. Prints how many were \
      requeued. `liaison peek` shows the quarantined messages and their ids.

      \(DocsPage.mailbox)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The mailbox's name.") var mailbox: String
  @Option(help: "Requeue only the message with this id (repeat for several); without it, all of them.")
  var id: [String] = []

  func run() async throws {
    try await Self.reporting {
      let count = try await options.withPlace(creating: false) { place in
        let name = try LiaisonName(mailbox)
        // Opening a mailbox that does not exist would create it: there is nothing to requeue.
        guard try await place.mailboxes().contains(where: { $0.name == name }) else { return 0 }
        return try await place.mailbox(mailbox, sender: ProcessInfo.processInfo.processName, timeout: nil)
          .requeueQuarantined(ids: id.isEmpty ? nil : id, timeout: nil)
      }
      try printLine("\(count)")
    }
  }
}
