// The tests' own PostgreSQL cluster and simulated remote host: what the tests of LiaisonPostgres
// count on them to do.

import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite("A throwaway PostgreSQL server")
struct PostgresTestServerTests {
  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func aNewServerAnswersTheLiaisonUserInTheLiaisonDatabaseOnItsSocketAndOnTCP() throws {
    let server = try PostgresTestServer.start()
    defer { server.remove() }
    #expect(try server.psql("SELECT current_user, current_database()") == "liaison|liaison")
    #expect(server.url == "postgres://liaison@127.0.0.1:\(server.port)/liaison")
    #expect(try output(of: server.psqlCommand(host: "127.0.0.1", sql: "SELECT inet_server_port()")) == "\(server.port)")
    #expect(try server.psql("SHOW max_connections") == "200")
    #expect(try server.psql("SHOW fsync") == "on")
    #expect(try server.psql("SELECT 1 UNION ALL SELECT 2") == "1\n2")
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func aServerThatNeedNotBeDurableSkipsFsync() throws {
    let server = try PostgresTestServer.start(durable: false)
    defer { server.remove() }
    #expect(try server.psql("SHOW fsync") == "off")
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func aFailingStatementThrowsWithPsqlsError() throws {
    let server = try PostgresTestServer.shared.get()
    #expect {
      try server.psql("SELECT * FROM no_such_table")
    } throws: { error in
      "\(error)".contains("relation \"no_such_table\" does not exist")
    }
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func dataOutlivesAStopAndTheServerComesBackOnItsPort() throws {
    let server = try PostgresTestServer.start()
    defer { server.remove() }
    try server.psql("CREATE TABLE kept (value text); INSERT INTO kept VALUES ('before the stop')")
    try server.stop()
    #expect(!server.isRunning)
    #expect(throws: (any Error).self) { try server.psql("SELECT 1") }
    try server.stop()  // a stopped server: nothing to do

    try server.startAgain()
    #expect(server.isRunning)
    #expect(try server.psql("SELECT value FROM kept") == "before the stop")
    #expect(try output(of: server.psqlCommand(host: "127.0.0.1", sql: "SELECT inet_server_port()")) == "\(server.port)")
    try server.restart()
    #expect(try server.psql("SELECT count(*) FROM kept") == "1")
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func aKilledServerDropsItsSessionsAndRecoversItsCommittedRowsWhenStartedAgain() throws {
    let server = try PostgresTestServer.start()
    defer { server.remove() }
    try server.psql("CREATE TABLE committed (n int); INSERT INTO committed SELECT generate_series(1, 1000)")
    let postmaster = try #require(server.postmasterID)
    let session = try ChildProcess(
      server.psqlCommand(host: "127.0.0.1")[0], Array(server.psqlCommand(host: "127.0.0.1").dropFirst()),
      errors: .pipe)
    session.write("SELECT 1;")
    #expect(try session.readLine() == "1")

    server.kill()
    #expect(!server.isRunning)
    // No shutdown: the lock file is left, as after a crash, and the session's connection is gone.
    #expect(FileManager.default.fileExists(atPath: server.dataDirectory + "/postmaster.pid"))
    session.write("SELECT 2;")
    let ended = session.finish()
    #expect(ended.termination != .exited(0))
    // psql says so in one of two ways: as its next query finds the socket closed, or, when it
    // noticed the end before (a loaded machine runs the kill's aftermath first), as it finds the
    // connection gone.
    #expect(
      ended.errors.contains("server closed the connection") || ended.errors.contains("connection to server was lost"),
      "\(ended.errors)")

    try server.startAgain()
    #expect(server.postmasterID != postmaster)
    #expect(try server.psql("SELECT count(*) FROM committed") == "1000")
    let log = try String(contentsOfFile: server.logFile, encoding: .utf8)
    #expect(log.contains("was not properly shut down; automatic recovery in progress"))
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func removeShutsTheServerDownAndDeletesItsFolder() throws {
    let server = try PostgresTestServer.start()
    let command = server.psqlCommand(host: "127.0.0.1", sql: "SELECT 1", connectTimeout: 5)
    #expect(try output(of: command) == "1")
    server.remove()
    #expect(!server.isRunning)
    #expect(!FileManager.default.fileExists(atPath: server.folder))
    #expect(try run(command).termination != .exited(0))
    server.remove()  // again: nothing to do
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func theWatchdogShutsDownAndDeletesTheServerOfAProcessThatEndedWithoutDoingSo() throws {
    let server = try PostgresTestServer.start()
    let command = server.psqlCommand(host: "127.0.0.1", sql: "SELECT 1", connectTimeout: 5)
    // The watchdog's input closed without `done`: what the kernel does when this process dies.
    server.abandonToWatchdog()
    #expect(!FileManager.default.fileExists(atPath: server.folder))
    #expect(try run(command).termination != .exited(0))
  }

  @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
  func theSharedServerIsOneServerForTheWholeProcess() throws {
    let first = try PostgresTestServer.shared.get()
    let second = try PostgresTestServer.shared.get()
    #expect(first === second)
    #expect(try first.psql("SELECT 1") == "1")
  }
}

@Suite("A simulated remote host: a network namespace")
struct PostgresTestServerNamespaceTests {
  @Test(
    .enabled(
      if: PostgresTestServer.mustRun && NetworkNamespace.mustRun,
      "needs PostgreSQL and, as root, iproute2: apt-get install postgresql iproute2"))
  func aProcessInTheNamespaceReachesTheServerOnTheHostAddressOnly() throws {
    let host = try NetworkNamespace.create()
    defer { host.remove() }
    let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", host.hostAddress])
    defer { server.remove() }
    let clientAddress = host.command(server.psqlCommand(host: host.hostAddress, sql: "SELECT inet_client_addr()"))
    #expect(try output(of: clientAddress) == host.namespaceAddress)
    #expect(server.url(host: host.hostAddress) == "postgres://liaison@\(host.hostAddress):\(server.port)/liaison")
    // The namespace's loopback is its own: nothing listens there.
    let loopback = try run(host.command(server.psqlCommand(host: "127.0.0.1", sql: "SELECT 1", connectTimeout: 5)))
    #expect(loopback.termination != .exited(0))
    #expect(loopback.errors.contains("Connection refused"))
  }

  @Test(
    .enabled(
      if: PostgresTestServer.mustRun && NetworkNamespace.mustRun,
      "needs PostgreSQL and, as root, iproute2: apt-get install postgresql iproute2"))
  func aCutStallsAConnectionInSilenceAndARestoreLetsTheSameConnectionGoOn() throws {
    let host = try NetworkNamespace.create()
    defer { host.remove() }
    let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", host.hostAddress])
    defer { server.remove() }
    let command = host.command(server.psqlCommand(host: host.hostAddress))
    let session = try ChildProcess(command[0], Array(command.dropFirst()), errors: .pipe)
    session.write("SELECT 1;")
    #expect(try session.readLine() == "1")
    let fromTheNamespace = "SELECT count(*) FROM pg_stat_activity WHERE client_addr = '\(host.namespaceAddress)'"
    #expect(try server.psql(fromTheNamespace) == "1")

    try host.cut()
    #expect(host.isCut)
    session.write("SELECT 2;")
    // Meanwhile, a new connection from the namespace: `timeout` only bounds the wait, should the
    // connect timeout not work.
    let attempt = try ChildProcess(
      "timeout",
      ["30"] + host.command(server.psqlCommand(host: host.hostAddress, sql: "SELECT 3", connectTimeout: 2)),
      input: .discard, errors: .pipe)
    // No answer, and no error either (an error would end psql, and its output): the query waits.
    // Two seconds without an answer is what a test can see of a silence.
    #expect {
      try session.readLine(timeout: 2)
    } throws: { error in
      "\(error)".contains("no line")
    }
    #expect(!session.hasExited)
    // Nothing told the server that the client went: it still counts its session.
    #expect(try server.psql(fromTheNamespace) == "1")
    // The new connection got no answer: it timed out (psql's status 2, not the 124 of `timeout`).
    let attempted = attempt.finish()
    #expect(attempted.termination == .exited(2))
    #expect(attempted.errors.contains("timeout expired"))
    // This side of the link is not cut off from the server.
    #expect(try server.psql("SELECT 4") == "4")

    try host.restore()
    #expect(!host.isCut)
    // TCP retransmits the held query: the same connection answers it, and goes on.
    #expect(try session.readLine() == "2")
    session.write("SELECT 5;")
    #expect(try session.readLine() == "5")
    session.closeInput()
    let ended = session.finish()
    #expect(ended.termination == .exited(0), "\(ended.errors)")
  }

  @Test(.enabled(if: NetworkNamespace.mustRun, "needs root and iproute2: apt-get install iproute2"))
  func namespacesHaveTheirOwnAddressesAndRemoveDeletesThemWithTheirLinks() throws {
    let first = try NetworkNamespace.create()
    let second = try NetworkNamespace.create()
    defer { second.remove() }
    #expect(first.name != second.name)
    #expect(Set([first.hostAddress, first.namespaceAddress, second.hostAddress, second.namespaceAddress]).count == 4)
    #expect([first.hostInterface, first.namespaceInterface].allSatisfy { $0.utf8.count <= 15 })
    #expect(FileManager.default.fileExists(atPath: "/run/netns/\(first.name)"))
    #expect(FileManager.default.fileExists(atPath: "/sys/class/net/\(first.hostInterface)"))
    #expect(try output(of: first.command(["cat", "/sys/class/net/\(first.namespaceInterface)/operstate"])) == "up")

    first.remove()
    #expect(!FileManager.default.fileExists(atPath: "/run/netns/\(first.name)"))
    #expect(!FileManager.default.fileExists(atPath: "/sys/class/net/\(first.hostInterface)"))
    first.remove()  // again: nothing to do
  }
}

/// Runs `command` (the program first) to its end: what it printed, and how it ended.
private func run(_ command: [String]) throws -> (output: String, errors: String, termination: Termination) {
  let child = try ChildProcess(command[0], Array(command.dropFirst()), input: .discard, errors: .pipe)
  let ended = child.finish()
  return (ended.output.trimmingCharacters(in: .newlines), ended.errors, ended.termination)
}

/// What `command` prints; throws when it fails.
private func output(of command: [String]) throws -> String {
  let ended = try run(command)
  guard ended.termination == .exited(0) else {
    throw PeerError("`\(command.joined(separator: " "))` \(ended.termination): \(ended.errors)")
  }
  return ended.output
}
