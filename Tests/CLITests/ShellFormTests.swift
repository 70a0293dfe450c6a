import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The forms a shell script needs to coordinate without a race, run by `sh` across real `liaison`
/// processes: a wait that cannot miss the post made right after it is started in the
/// background, a store write that gives up on a stopped writer, and an atomic update of a value.
@Suite("The liaison command's race-free forms for scripts")
struct ShellFormTests {
  let directory = TemporaryDirectory()

  /// Runs `script` with `sh -c`, `liaison` on its path as `$LIAISON`, on the test's container
  /// (or on `place`, which the script passes as `$PLACE`): the status a shell reports, its
  /// standard output and error.
  func shell(_ script: String, place: [String] = []) throws -> (status: Int32, output: String, errors: String) {
    let child = try ChildProcess(
      "/bin/sh", ["-c", script],
      environment: [
        "LIAISON": liaisonPath, "LIAISON_CONTAINER": directory.path, "PLACE": place.joined(separator: " "),
        "LIAISON_POSTGRES_URL": "", "LIAISON_NAMESPACE": "",
      ],
      errors: .pipe)
    let (output, errors, termination) = child.finish()
    return (termination.shellStatus, output, errors)
  }

  // MARK: - wait --after

  /// 20 rounds of `state --sequence`, `wait --after` started in the background, then `post`:
  /// every wait returns 0 (a plain `wait` in the background misses most of those posts, and
  /// would time out with 75).
  @Test func aWaitStartedInTheBackgroundAfterReadingTheSequenceNeverMissesThePost() throws {
    let result = try shell(Self.waitRounds)
    #expect(result.status == 0, "\(result.output) \(result.errors)")
    #expect(result.output == (1...20).map { "\($0)\n" }.joined(), "\(result.errors)")
  }

  /// `wait --after` returns at once with the state of a post made since the sequence it names,
  /// and waits (here until its timeout) when there was none; `state --sequence` reads 0 where
  /// nothing was posted, even with no container, and creates nothing.
  @Test func waitAfterReturnsAtOnceForAPostSinceTheSequenceAndStateReadsIt() throws {
    let result = try shell(
      """
      set -e
      $LIAISON state ring --sequence
      test ! -e "$LIAISON_CONTAINER/.liaison"
      $LIAISON post ring --state 7
      $LIAISON post ring --state 8
      $LIAISON state ring --sequence
      $LIAISON wait ring --after 1
      $LIAISON wait ring --after 0 --json
      status=0; $LIAISON wait ring --after 2 --timeout 0.2 || status=$?
      echo "status $status"
      status=0; $LIAISON state ring --sequence --set 3 2>/dev/null || status=$?
      echo "status $status"
      status=0; $LIAISON wait ring --after -1 2>/dev/null || status=$?
      echo "status $status"
      """)
    #expect(result.status == 0, "\(result.errors)")
    #expect(
      result.output == """
        0
        2
        8
        {"name":"ring","sequence":2,"state":8}
        status 75
        status 64
        status 64

        """, "\(result.errors)")
  }

  /// The rounds of ``aWaitStartedInTheBackgroundAfterReadingTheSequenceNeverMissesThePost()``:
  /// each prints its number once its wait has returned 0. The timeout only bounds a miss.
  static let waitRounds = """
    i=0
    while [ $i -lt 20 ]; do
      i=$((i + 1))
      seq=$($LIAISON state ring --sequence $PLACE) || exit 90
      $LIAISON wait ring --after "$seq" --timeout 30 $PLACE > /dev/null &
      $LIAISON post ring $PLACE || exit 91
      wait $!; status=$?
      [ $status -eq 0 ] || { echo "round $i: wait exited $status" >&2; exit 92; }
      echo $i
    done
    """

  // MARK: - --timeout on store writes

  /// While a stopped process holds the defaults store's write lock, `defaults write`, `defaults
  /// delete` and `send` with `--timeout` give up with 75 and say what they waited for, writing
  /// nothing; once that process is killed, they write.
  @Test func storeWritesGiveUpOnAStoppedWriterAtTheirTimeout() throws {
    #expect(try shell("$LIAISON defaults write app mode light && $LIAISON send inbox first").status == 0)
    let writer = try Peer(container: directory.path)
    try writer.send(.holdlock, "store", "defaults.write")
    try writer.send(.holdlock, "store", "mailboxes.write")
    writer.child.kill(SIGSTOP)
    defer { writer.kill() }
    for command in ["defaults write app mode dark", "defaults delete app mode", "send inbox hello"] {
      let result = try shell("$LIAISON \(command) --timeout 0.2")
      #expect(result.status == 75, "\(command): \(result.errors)")
      #expect(result.output.isEmpty)
      let store = command.hasPrefix("send") ? "mailboxes" : "defaults"
      #expect(
        result.errors.hasPrefix(
          "liaison: Gave up after 0.2 seconds (--timeout) waiting for another process's write of the \(store) store '"),
        "\(result.errors)")
      #expect(result.errors.contains("Nothing was written."), "\(result.errors)")
    }
    writer.child.kill(SIGCONT)
    writer.kill()
    let after = try shell(
      """
      set -e
      $LIAISON defaults read app mode
      $LIAISON peek inbox | cut -f 3
      $LIAISON defaults write app mode dark --timeout 30
      $LIAISON defaults read app mode
      """)
    #expect(after.status == 0, "\(after.errors)")
    #expect(after.output == "\"light\"\n\"first\"\n\"dark\"\n", "\(after.errors)")
  }

  // MARK: - defaults write --if-value

  /// 4 processes each add one to a value 10 times, by reading it and writing it back with
  /// `--if-value` (or `--if-absent`) until the write is made: the value ends at exactly 40.
  /// (Without the condition, 8 processes × 5 plain read-then-write increments kept 7 of 40.)
  @Test func fourProcessesIncrementingWithIfValueLoseNoIncrement() throws {
    let result = try shell(Self.increments)
    #expect(result.status == 0, "\(result.errors)")
    #expect(try shell("$LIAISON defaults read stats runs").output == "40\n")
  }

  /// `--if-value` writes only over the value given, `--if-absent` only where there is none; a
  /// condition that does not hold exits 1 and writes nothing.
  @Test func aConditionalWriteExitsOneAndWritesNothingWhenTheValueDiffers() throws {
    let result = try shell(
      """
      run() { "$@"; echo "status $?"; }
      run $LIAISON defaults write app mode light --if-value dark
      run $LIAISON defaults write app mode light --if-absent
      run $LIAISON defaults write app mode dark --if-absent
      run $LIAISON defaults write app mode dim --if-value light
      run $LIAISON defaults write app mode '"dimmer"' --if-value '"dim"'
      run $LIAISON defaults write app mode bright --if-value dim
      run $LIAISON defaults write app mode x --if-value dim --if-absent 2>/dev/null
      $LIAISON defaults read app mode
      """)
    #expect(
      result.output == """
        status 1
        status 0
        status 1
        status 0
        status 0
        status 1
        status 64
        "dimmer"

        """, "\(result.errors)")
  }

  /// Each of 4 background loops adds one to `stats runs` 10 times, with the update a script
  /// writes (as `liaison defaults write --help` shows it); the script exits non-zero if any loop
  /// met an error other than a condition that did not hold.
  static let increments = """
    increment() {
      n=0
      while [ $n -lt 10 ]; do
        if old=$($LIAISON defaults read stats runs $PLACE); then
          $LIAISON defaults write stats runs $((old + 1)) --if-value "$old" $PLACE
        else
          $LIAISON defaults write stats runs 1 --if-absent $PLACE
        fi
        case $? in
          0) n=$((n + 1)) ;;
          1) ;;
          *) exit 1 ;;
        esac
      done
    }
    pids=""
    for p in 1 2 3 4; do
      increment &
      pids="$pids $!"
    done
    failed=0
    for pid in $pids; do wait $pid || failed=1; done
    exit $failed
    """

  // MARK: - On PostgreSQL

  #if Postgres
    /// A namespace of this test's own on the shared server.
    static func place(_ server: PostgresTestServer) -> [String] {
      ["--postgres", server.url, "--namespace", "shell-\(UInt32.random(in: 0...UInt32.max))"]
    }

    /// The rounds of `state --sequence`, `wait --after &`, `post` on PostgreSQL: no wait misses.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func onPostgresAWaitAfterTheSequenceNeverMissesThePost() throws {
      let result = try shell(Self.waitRounds, place: Self.place(try PostgresTestServer.shared.get()))
      #expect(result.status == 0, "\(result.output) \(result.errors)")
      #expect(result.output == (1...20).map { "\($0)\n" }.joined(), "\(result.errors)")
    }

    /// 4 processes × 10 increments with `--if-value` on PostgreSQL end at exactly 40; a
    /// `--timeout` bounds a write there too (the server's lock wait).
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func onPostgresFourProcessesIncrementingWithIfValueLoseNoIncrement() throws {
      let place = Self.place(try PostgresTestServer.shared.get())
      let result = try shell(Self.increments, place: place)
      #expect(result.status == 0, "\(result.errors)")
      #expect(try shell("$LIAISON defaults read stats runs $PLACE", place: place).output == "40\n")
      let timeout = try shell("$LIAISON defaults write stats runs 0 --timeout 1 $PLACE", place: place)
      #expect(timeout.status == 0, "\(timeout.errors)")
      #expect(try shell("$LIAISON defaults read stats runs $PLACE", place: place).output == "0\n")
    }
  #endif
}
