import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine

/// A notification as the CLI prints it.
struct NotificationReport: Encodable {
  let name: String
  let state: UInt64
  let sequence: UInt64

  init(_ notification: SignalNotification) {
    name = notification.name.rawValue
    state = notification.state
    sequence = notification.sequence
  }
}

struct PostCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "post",
    abstract: "Post a signal: wake every process observing it.",
    discussion: "With --state, sets the signal's 64-bit state first, in the same step." + "\n\n" + DocsPage.signal
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The signal's name.") var name: String
  @Option(help: "The state to set (0 to 2^64-1).", transform: CommandLineValue.state) var state: UInt64?

  func run() async throws {
    try await Self.reporting {
      try await options.withPlace(creating: true) { place in try await place.post(signal: name, state: state) }
    }
  }
}

struct WaitCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "wait",
    abstract: "Wait for the next notification of a signal and print its state.",
    discussion: """
      Exits 0 after the next post; exits \(ExitStatus.busy) if --timeout passes first.

      A wait started in the background may begin after the post it is meant to see. With --after, it \
      starts from a point read before: it returns at once if the signal has been posted since, else at \
      the next post. No post can slip between the two:

        seq=$(liaison state ready --sequence)
        liaison wait ready --after "$seq" &
        liaison post ready

      \(DocsPage.signal)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The signal's name.") var name: String
  @Option(
    parsing: .unconditional,
    help: ArgumentHelp("Give up after this many seconds (default: wait as long as it takes).", valueName: "seconds"),
    transform: CommandLineValue.timeout)
  var timeout: Duration?
  @Option(
    help: ArgumentHelp(
      "Return at once if the signal has had a post since its sequence was this one (as `liaison state NAME "
        + "--sequence` prints it); else wait for its next post.",
      valueName: "sequence"),
    transform: CommandLineValue.sequence)
  var after: UInt64?
  @Flag(help: "Print JSON: name, state, sequence.") var json = false

  func run() async throws {
    try await Self.reporting {
      let received = try await options.withPlace(creating: true) { place in try await next(in: place) }
      guard let received else {
        throw CLIError("no notification of '\(name)' within \(timeout ?? .zero).", status: ExitStatus.busy)
      }
      try printLine(json ? try jsonLine(NotificationReport(received)) : "\(received.state)")
    }
  }

  /// The next notification of the signal in `place` (with --after, the first whose sequence is
  /// larger), or `nil` when the timeout passes first.
  private func next(in place: some CommandPlace) async throws -> SignalNotification? {
    let signal = try place.signal(name)
    let notifications = try await signal.notifications(ignoringOwnPosts: false)
    if let after {
      // Read once subscribed: a post made before this read is seen here, one made after it by
      // the subscription.
      let sequence = try await signal.sequence
      if sequence > after {
        return SignalNotification(name: signal.name, state: try await signal.state, sequence: sequence)
      }
    }
    let (timeout, after) = (timeout, after ?? 0)
    return await withTaskGroup(of: SignalNotification?.self) { group in
      group.addTask {
        var iterator = notifications.makeAsyncIterator()
        // Every post has a sequence of 1 or more; one delivered now is at most `after` only when
        // it was made before the read above.
        while let notification = try? await iterator.next() {
          if notification.sequence > after { return notification }
        }
        return nil
      }
      if let timeout {
        group.addTask {
          try? await Task.sleep(for: timeout)
          return nil
        }
      }
      let first = await group.next() ?? nil
      group.cancelAll()
      return first
    }
  }
}

struct ObserveCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "observe",
    abstract: "Print a line for each notification of the signals, until interrupted.",
    discussion: "Each line is `NAME STATE SEQUENCE`, or a JSON object with --json. Notifications coalesce." + "\n\n"
      + DocsPage.signal
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The signals' names; `-` reads them from standard input, one a line (for many names).")
  var names: [String]
  @Flag(help: "Print JSON lines.") var json = false

  func validate() throws {
    if names.isEmpty { throw ValidationError("Name at least one signal to observe.") }
    if names.contains("-") && names != ["-"] {
      throw ValidationError("Give the names either on the command line or, with `-` alone, on standard input.")
    }
  }

  func run() async throws {
    try await Self.reporting {
      try await options.withPlace(creating: true) { place in try await observe(place) }
    }
  }

  /// Prints the notifications of the signals in `place` until interrupted, or until a line
  /// cannot be written.
  private func observe(_ place: some CommandPlace) async throws {
    let names = names == ["-"] ? try TextInput.lines(ofStandardInput: "The names on standard input") : names
    let sequences = try await names.asyncMap { try await place.signal($0).notifications(ignoringOwnPosts: false) }
    let json = json
    try await withThrowingTaskGroup(of: Void.self) { group in
      for notifications in sequences {
        group.addTask {
          do {
            for try await notification in notifications {
              let report = NotificationReport(notification)
              try printLine(json ? try jsonLine(report) : "\(report.name) \(report.state) \(report.sequence)")
            }
          } catch let failure as CLIError {
            throw failure
          } catch {}
        }
      }
      // The first line that cannot be written ends every observation.
      for try await _ in group {}
    }
  }
}

extension Array {
  /// The elements transformed in order, one at a time.
  fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
    var results: [T] = []
    for element in self { results.append(try await transform(element)) }
    return results
  }
}

struct StateCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "state",
    abstract: "Print a signal's state, or set it with --set (without notifying anybody).",
    discussion: """
      Exits 1 when the signal has never been posted or set (its state then counts as 0); creates nothing. \
      With --sequence, prints how many posts it has had instead, for `liaison wait --after`.

      \(DocsPage.signal)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Argument(help: "The signal's name.") var name: String
  @Option(help: "The state to set (0 to 2^64-1).", transform: CommandLineValue.state) var set: UInt64?
  @Flag(
    help: """
      Print the signal's sequence instead: how many posts it has had, 0 when none (nor a container). The \
      starting point of `liaison wait NAME --after SEQUENCE`.
      """)
  var sequence = false

  func validate() throws {
    if sequence && set != nil { throw ValidationError("--sequence reads and --set writes: give one of them.") }
  }

  func run() async throws {
    try await Self.reporting {
      if sequence {
        _ = try LiaisonName(name)
        // A container that no process has used has had no posts; reading it creates nothing.
        if try options.choice() == .folder && !options.folder.containerExists { return try printLine("0") }
        return try await options.withPlace(creating: false) { place in
          try printLine("\(try await place.sequence(ofSignal: name))")
        }
      }
      try await options.withPlace(creating: set != nil) { place in
        if let set { return try await place.setState(ofSignal: name, to: set) }
        guard let state = try await place.recordedState(ofSignal: name) else {
          throw CLIError("No signal '\(name)' in the container: it has never been posted or set.", status: 1)
        }
        try printLine("\(state)")
      }
    }
  }
}
