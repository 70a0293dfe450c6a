// Uses each library product as the README shows it, from an `async` function: a lock (Liaison), a
// default and a mailbox (LiaisonStore), PostgreSQL's container (LiaisonPostgres, which is empty
// without the trait `Postgres`: this does not compile unless the trait reached it), and a view
// property's type (LiaisonSwiftUI; on Linux built against Liaison's model of SwiftUI).
import Foundation
import Liaison
import LiaisonPostgres
import LiaisonStore
import LiaisonSwiftUI

@main
struct Consumer {
  static func main() async throws {
    guard CommandLine.arguments.count == 2 else {
      print("usage: Consumer FOLDER")
      exit(64)
    }
    try await launch(in: CommandLine.arguments[1])
    let fleet: PostgresContainer.Type = PostgresContainer.self
    print("built with the trait Postgres: \(fleet)")
    print("a view property: \(SharedValue<String>.self)")
  }
}

/// Counts a launch in the folder `path` (created if missing) and announces it in a mailbox, under
/// a lock; prints what it did.
func launch(in path: String) async throws {
  let container = try SharedContainer(directory: path, createIfMissing: true)
  let defaults = try await container.defaults("consumer")
  let inbox = try await container.mailbox("inbox", sender: "consumer")
  try await container.lock("consumer").withLock(timeout: .seconds(10)) {
    let launches = try await defaults.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }
    _ = try await inbox.send("launch \(launches ?? 0)", id: "launch-\(launches ?? 0)")
    print("under the lock 'consumer': launch \(launches ?? 0), announced in the mailbox 'inbox'")
  }
}
