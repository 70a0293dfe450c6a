// The peer's commands that need SQL on the PostgreSQL place: a counter guarded by fencing tokens,
// as the documentation tells users to guard their writes. Without the trait `Postgres`, they answer
// that they need it.

import Liaison
import LiaisonTestSupport

#if Postgres
  import LiaisonPostgres
  import PostgresNIO

  /// The place, as a PostgreSQL one.
  private var postgres: PostgresContainer {
    get throws {
      guard let postgres = place as? PostgresContainer else {
        throw LiaisonError(.invalidArgument, "this command needs a PostgreSQL place")
      }
      return postgres
    }
  }

  /// Adds one to the counter unless a write with a larger token came first; whether it was applied.
  private func fencedIncrement(_ postgres: PostgresContainer, token: UInt64) throws -> Bool {
    let token = Int64(bitPattern: token)
    let rows = try awaiting {
      try await postgres.query(
        """
        UPDATE liaison_test_counter SET value = value + 1, fencing_token = \(token)
        WHERE id = 1 AND fencing_token <= \(token) RETURNING value
        """, doing: "increment the test counter")
    }
    return !rows.isEmpty
  }

  let postgresCommands: [PeerCommandHandler] = [
    PeerCommandHandler(
      .pgFencedincrement,
      "LOCK COUNT   COUNT times: lock, add one to liaison_test_counter guarded by the token, unlock → ok APPLIED REFUSED"
    ) { words in
      let postgres = try postgres
      let lock = try postgres.lock(words[1])
      var (applied, refused) = (0, 0)
      for _ in 0..<Int(words[2])! {
        let held = try awaiting { try await lock.lock(.exclusive, timeout: nil) }
        let token = try awaiting { try await held.fencingToken() }
        if try fencedIncrement(postgres, token: token) { applied += 1 } else { refused += 1 }
        blocking { await held.unlock() }
      }
      return "\(applied) \(refused)"
    },
    PeerCommandHandler(.pgFencedwrite, "TOKEN   one increment guarded by TOKEN → ok applied | ok refused") { words in
      try fencedIncrement(try postgres, token: UInt64(words[1])!) ? "applied" : "refused"
    },
  ]
#else
  let postgresCommands = [PeerCommand.pgFencedincrement, .pgFencedwrite].map { command in
    PeerCommandHandler(command, "needs the trait Postgres") { _ in
      throw LiaisonError(.invalidArgument, "this command needs a peer built with the trait Postgres")
    }
  }
#endif
