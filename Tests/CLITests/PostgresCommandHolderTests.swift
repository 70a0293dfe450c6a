import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

#if Postgres
  /// On PostgreSQL, what holds the lock is what runs, as with `flock(1)`: the command inherits the
  /// socket of the session that holds the lock or claim, so killing `liaison` alone frees nothing
  /// while the command, or a process it started, runs.
  extension PostgresCommandTests {
    /// How the tests reach the server: over TCP, and over its Unix socket (liaison finds the
    /// socket of each in its own way).
    enum Route: String, CaseIterable, Sendable {
      case tcp, unixSocket
    }

    func place(_ server: PostgresTestServer, by route: Route) -> [String] {
      switch route {
      case .tcp: place(server)
      case .unixSocket:
        ["--postgres", "postgres://liaison@:\(server.port)/liaison?host=\(server.folder)", "--namespace", namespace]
      }
    }

    /// `liaison` is SIGKILLed (an OOM kill, a supervisor that signals only its child) while its
    /// command runs: no other `liaison lock` gets the lock until the command has ended, then the
    /// next one gets it at once.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"),
      arguments: Route.allCases)
    func killingLiaisonLeavesTheLockWithTheCommand(_ route: Route) throws {
      let server = try PostgresTestServer.shared.get()
      let place = place(server, by: route)
      let holder = try start(["lock"] + place + ["job", "--", "sh", "-c", "echo ready; read line"])
      #expect(try holder.readLine() == "ready")
      holder.kill(SIGKILL)
      _ = holder.wait()
      for _ in 0..<3 {
        let busy = try liaison(["lock"] + place + ["job", "--timeout", "0", "--", "echo", "ran"])
        #expect(busy.status == 75 && busy.output.isEmpty, "\(busy)")
      }
      holder.write("done")  // the command, still running, reads it and ends
      let next = try liaison(["lock"] + place + ["job", "--timeout", "30", "--", "echo", "ran"])
      #expect(next.status == 0 && next.output == "ran\n", "\(next)")
    }

    /// A command that starts a process in the background and exits (what a self-daemonising
    /// program does) leaves the lock with that process, as a folder's lock stays with whoever has
    /// its descriptor: liaison ends, the lock stays held until the background process ends.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aProcessTheCommandStartedKeepsTheLockAfterLiaisonEnds() throws {
      let server = try PostgresTestServer.shared.get()
      let started = try liaison(
        ["lock"] + place(server) + ["job", "--", "sh", "-c", "sleep 600 >/dev/null 2>&1 </dev/null & echo $!"])
      try #require(started.status == 0, "\(started)")
      let worker = try #require(pid_t(started.output.trimmingCharacters(in: .whitespacesAndNewlines)))
      defer { kill(worker, SIGKILL) }
      #expect(try liaison(["lock"] + place(server) + ["job", "--timeout", "0", "--", "true"]).status == 75)
      kill(worker, SIGKILL)
      #expect(try liaison(["lock"] + place(server) + ["job", "--timeout", "30", "--", "true"]).status == 0)
    }

    /// The same for a claim: with liaison SIGKILLed, the presence stays active for as long as the
    /// command runs, and a second claim is refused.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func killingLiaisonLeavesTheClaimWithTheCommand() throws {
      let server = try PostgresTestServer.shared.get()
      let holder = try start(
        ["presence", "claim"] + place(server) + ["syncd", "--", "sh", "-c", "echo ready; read l"])
      #expect(try holder.readLine() == "ready")
      holder.kill(SIGKILL)
      _ = holder.wait()
      #expect(try liaison(["presence", "check"] + place(server) + ["syncd"]).status == 0)
      #expect(try liaison(["presence", "claim"] + place(server) + ["syncd", "--", "true"]).status == 75)
      holder.write("done")
      // The server ends the session once the command's socket closes, a moment after the command
      // ends: `presence claim` does not wait, so it is tried again (each try is a whole process).
      var claimed: Int32 = 75
      for _ in 0..<100 where claimed == 75 {
        claimed = try liaison(["presence", "claim"] + place(server) + ["syncd", "--", "true"]).status
      }
      #expect(claimed == 0)
    }
  }
#endif
