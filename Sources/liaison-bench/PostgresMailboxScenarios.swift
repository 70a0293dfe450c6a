// The mailbox scenarios of `liaison-bench postgres`: a PostgresMailbox's one-way latency and
// batched throughput across processes, each beside the same SQL statements sent through bare
// postgres-nio connections (the floor), in the same run on the same server.

import Foundation

#if Postgres
  import Liaison
  import LiaisonPostgres
  import PostgresNIO

  enum PostgresMailboxScenarios {
    /// Messages per throughput sample, sent in batches of ``batchSize``.
    static let messagesPerSample = 10_000
    static let batchSize = PlaceScenarios.batchSize
    /// The raw floors' mailbox, in the bench's namespace.
    static let rawMailbox = "bench-raw"

    /// `pg.mailbox.latency`: a send in this process until the receiver in another process has the
    /// message (it answers with the time since the send, carried in the payload). Between samples
    /// the receiver acknowledges, and the next send waits for that. Against `pg.raw.mailbox-sql`,
    /// the same statements on bare connections: the send function, then in the listening peer
    /// the notification, which carries the message (a `SELECT` when it does not).
    static func latency(
      _ container: PostgresContainer, _ raw: PostgresConnection, url: String, namespace: String, peers: [Measurement]
    ) throws -> ScenarioResult {
      let mailbox = try blocking { try await container.mailbox("bench-latency", sender: "bench") }
      let receiver = try BenchPeer("pg-mailbox-receiver", [url, namespace, "bench-latency", "latency"])
      let rawReceiver = try BenchPeer("pg-raw-mailbox-receiver", [url, namespace])
      let samples = try interleave(
        samples: 400,
        [
          PlaceScenarios.mailboxLatency(mailbox, receiver),
          {
            try blocking { try await rawSend(raw, namespace: namespace, payloads: [Data(String(now()).utf8)]) }
            let latency = rawReceiver.readTimestamp()
            _ = rawReceiver.readByte()
            return Double(latency)
          },
        ])
      for (peer, name) in [(receiver, "mailbox receiver"), (rawReceiver, "raw receiver")] {
        if let ending = peer.stop() { throw BenchError("the \(name) peer: \(ending)") }
      }
      return ScenarioResult(
        measurement: Measurement("pg.mailbox.latency", samples[0]), unit: "ns",
        baselines: [Measurement("pg.raw.mailbox-sql", samples[1])] + peers,
        target: "send: 1 round trip and a commit, whose notification carries the message to the receiver's LISTEN "
          + "connection (no read); expect ≈ pg.raw.mailbox-sql; ≤ 0.5× each job queue (peer.…)")
    }

    /// `pg.mailbox.throughput`: messages per second from this process to a receiver in another,
    /// in batches of ``batchSize`` (`sendAll`; `receive(limit:)` and one `acknowledge` per batch),
    /// from the first send to the receiver's acknowledgement of the last. Against
    /// `pg.raw.mailbox-batches`: the same statements, batch by batch, on two bare connections in
    /// this process (send, read, remove: no second process, no wake-ups).
    static func throughput(
      _ container: PostgresContainer, _ raw: PostgresConnection, url: String, namespace: String, peers: [Measurement]
    ) throws -> ScenarioResult {
      let mailbox = try blocking { try await container.mailbox("bench-throughput", sender: "bench") }
      let receiver = try BenchPeer(
        "pg-mailbox-receiver", [url, namespace, "bench-throughput", "throughput", String(messagesPerSample)])
      let reader = try blocking { try await RawPostgres.connect(url) }
      defer { _ = try? blocking { try await reader.close() } }
      let batch = (0..<batchSize).map { BenchMessage(n: $0, text: "message \($0)") }
      let encoded = try batch.map { try JSONEncoder().encode($0) }
      let samples = try interleave(
        samples: 5,
        [
          PlaceScenarios.mailboxThroughput(mailbox, receiver, batch: batch, batches: messagesPerSample / batchSize),
          {
            let start = now()
            try blocking {
              var cursor: Int64 = 0
              for _ in 0..<(messagesPerSample / batchSize) {
                try await rawSend(raw, namespace: namespace, payloads: encoded)
                cursor = try await rawReceive(reader, namespace: namespace, after: cursor)
              }
            }
            return Double(messagesPerSample) / (Double(now() - start) / 1e9)
          },
        ])
      if let ending = receiver.stop() { throw BenchError("the mailbox receiver peer: \(ending)") }
      return ScenarioResult(
        measurement: Measurement("pg.mailbox.throughput", samples[0]), unit: "msgs/s",
        baselines: [Measurement("pg.raw.mailbox-batches", samples[1])] + peers,
        target: "per batch of \(batchSize): the send (1 statement, 1 commit), the receiver's read and "
          + "acknowledgement (2 statements, 1 commit); expect ≈ pg.raw.mailbox-batches; ≥ 2× each job queue "
          + "(peer.…-acked: to the last job finished)")
    }

    // MARK: The same statements on bare connections

    /// LiaisonPostgres's send statement (PostgresMailbox.swift), for the raw mailbox.
    static func rawSend(_ connection: PostgresConnection, namespace: String, payloads: [Data]) async throws {
      let ids = payloads.map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }
      let week = 7 * 24 * 3600.0
      _ = try await connection.query(
        """
        SELECT liaison.mailbox_send(\(namespace), \(rawMailbox), 'bench', \(Date().timeIntervalSince1970), \(week),
          \(ids), \(ids.map { _ in false }), \(payloads.map { _ in Int16(0) }),
          \(payloads.map { ByteBuffer(bytes: $0) }))
        """, logger: RawPostgres.logger
      ).collect()
    }

    /// LiaisonPostgres's receiver's read and acknowledgement (PostgresMailboxReceiver.swift), for
    /// the raw mailbox: returns the new cursor and each message's payload. With `carried`, the
    /// messages a send carried in its notification (`liaison.mailbox_send`), the read is skipped
    /// when they follow the cursor, as the receiver skips it.
    @discardableResult
    static func rawReceive(
      _ connection: PostgresConnection, namespace: String, after cursor: Int64, carried: Substring? = nil,
      each: (Data) -> Void = { _ in }
    ) async throws -> Int64 {
      var positions: [Int64] = []
      var ids: [String] = []
      var next = cursor
      if let carried, carried.first == "{",
        let decoded = try? JSONSerialization.jsonObject(with: Data(carried.utf8)) as? [String: Any],
        let first = decoded["first"] as? Int64, let count = decoded["count"] as? Int64, first == cursor + 1,
        let messages = decoded["messages"] as? [[String: Any]]
      {
        for message in messages {
          guard let position = message["position"] as? Int64, let id = message["id"] as? String,
            let base64 = message["payload"] as? String, let payload = Data(base64Encoded: base64)
          else { throw BenchError("a carried message without its position, id or payload: \(message)") }
          positions.append(position)
          ids.append(id)
          each(payload)
        }
        next = first + count - 1
      } else {
        let rows = try await connection.query(
          """
          SELECT position, id, sent_at, sender, kind, payload, quarantine_reason FROM liaison.mailbox_message
          WHERE namespace = \(namespace) AND mailbox = \(rawMailbox) AND position > \(cursor)
            AND quarantine_reason IS NULL
          ORDER BY position LIMIT \(batchSize)
          """, logger: RawPostgres.logger
        ).collect()
        for row in rows {
          let (position, id, _, _, _, payload, _) = try row.decode(
            (Int64, String, Double, String, Int16, Data, String?).self, context: .default)
          positions.append(position)
          ids.append(id)
          each(payload)
        }
        next = positions.last ?? cursor
      }
      guard !positions.isEmpty else { return next }
      _ = try await connection.query(
        """
        SELECT count(*) FROM liaison.mailbox_remove(\(namespace), \(rawMailbox), \(positions), \(ids),
          \(Date().timeIntervalSince1970))
        """, logger: RawPostgres.logger
      ).collect()
      return next
    }

    // MARK: Peers

    /// The receiver peer (`PlaceScenarios.receive`) on the server at `url`, waiting at most 30 s
    /// for the receive claim.
    static func receive(url: String, namespace: String, name: String, mode: [String], input: CInt, output: CInt)
      throws -> Never
    {
      let container = try blocking { try await PostgresContainer(url: url, namespace: namespace) }
      let receiver = try blocking { try await container.mailbox(name).receiver(timeout: .seconds(30)) }
      PlaceScenarios.receive(receiver, mode: mode, input: input, output: output, keeping: container)
    }

    /// The raw receiver peer: `LISTEN liaison` on one bare connection; at each notification of
    /// the raw mailbox, the messages it carries or else the receiver's read, and the
    /// acknowledgement, on a second one. Answers each
    /// message with the time since its send (its payload), and one byte once acknowledged.
    static func receiveRaw(url: String, namespace: String, input: CInt, output: CInt) throws -> Never {
      let (listening, reading) = try blocking {
        (try await RawPostgres.connect(url), try await RawPostgres.connect(url))
      }
      Task.detached {
        do {
          var cursor: Int64 = 0
          try await listening.listen(on: "liaison") { notifications in
            writeBytes(output, [UInt8(ascii: "r")])  // LISTEN is in effect
            let prefix = "m \(namespace) \(rawMailbox)"
            for try await notification in notifications where notification.payload.hasPrefix(prefix) {
              var latencies: [UInt64] = []
              let carried = notification.payload.dropFirst(prefix.count).drop { $0 == " " }
              cursor = try await rawReceive(reading, namespace: namespace, after: cursor, carried: carried) { payload in
                latencies.append(now() &- (UInt64(String(decoding: payload, as: UTF8.self)) ?? 0))
              }
              for latency in latencies { writeBytes(output, encodeTimestamp(latency)) }
              for _ in latencies { writeBytes(output, [UInt8(ascii: "a")]) }
            }
          }
        } catch {
          FileHandle.standardError.write(Data("raw mailbox receiver: \(error)\n".utf8))
          exit(1)
        }
      }
      _ = readBytes(input, 1)  // ends the process when the input closes
      fatalError("unreachable")
    }
  }
#endif
