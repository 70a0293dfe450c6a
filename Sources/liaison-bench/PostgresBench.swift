// liaison-bench postgres: LiaisonPostgres's locks and signals against postgres-nio's own round
// trips and against psycopg, all measured in the same run (the scenarios: PostgresScenarios.swift);
// on its own server, the lock, signal and mailbox figures again through PgBouncer in session mode
// (`pg.pooled.*`), and in transaction mode with leases (`pg.leased.*`), beside the direct ones.
//
//   swift run -c release --traits Postgres liaison-bench postgres [--url URL] [--json] [--runs N]
//
// Without --url, it starts a throwaway PostgreSQL server (durable: fsync on, as a real server)
// and removes it at the end. With --url, it works in the namespace `liaison-bench-PID` of that
// database and deletes its rows at the end. --runs N repeats every scenario N times on the same
// server and prints, after the runs, each figure's median and range across them. --json prints
// `{"psycopg": "…", "jobQueues": […], "runs": [{"scenarios": […]}, …]}`, each run in the shape of
// the other scenarios.
//
// The Python peers run from the venv .build-venv that Benchmarks/postgres/make-venv.sh makes;
// without it the bench says so and measures the rest. They are psycopg (psycopg_peer.py: what a
// user writes by hand, and the raw INSERT + NOTIFY floors) and the job queues a user would pick
// instead of a mailbox, Procrastinate and PgQueuer (job_queue_peer.py, on the same server in the
// same run, each in a schema of its own that it drops at the end).

import Foundation

#if Postgres
  import ChildProcesses
  import LiaisonPostgres
  import LiaisonTestSupport

  enum PostgresBench {
    static let usage = "usage: liaison-bench postgres [--url postgres://USER@HOST:PORT/DATABASE] [--json] [--runs N]"

    struct Options {
      var url: String?
      var json = false
      var runs = 1
    }

    static func parse(_ arguments: [String]) -> Options? {
      var options = Options()
      var rest = arguments[...]
      while let argument = rest.popFirst() {
        switch argument {
        case "--json": options.json = true
        case "--url":
          guard let url = rest.popFirst() else { return nil }
          options.url = url
        case "--runs":
          guard let text = rest.popFirst(), let runs = Int(text), runs >= 1 else { return nil }
          options.runs = runs
        default: return nil
        }
      }
      return options
    }

    /// Runs the bench; returns the exit status.
    static func main(_ arguments: [String]) -> Int32 {
      if arguments.contains("--help") || arguments.contains("-h") {
        print(usage)
        return 0
      }
      guard let options = parse(arguments) else {
        FileHandle.standardError.write(Data((usage + "\n").utf8))
        return 64
      }
      do {
        try run(options)
        return 0
      } catch {
        FileHandle.standardError.write(Data("liaison-bench postgres: \(error)\n".utf8))
        return 1
      }
    }

    private static func run(_ options: Options) throws {
      var server: PostgresTestServer?
      defer { server?.remove() }
      let url: String
      if let given = options.url {
        url = given
      } else {
        let started = try PostgresTestServer.start(durable: true)
        server = started
        url = started.url + "?sslmode=disable"
      }
      let namespace = "liaison-bench-\(getpid())"
      let psycopg = PsycopgPeer.locate()
      var psycopgStatus = ""
      if case .failure(let reason) = psycopg {
        psycopgStatus = reason.description
        FileHandle.standardError.write(Data("\(reason)\n".utf8))
      }
      let jobQueues = JobQueuePeer.locate()
      var jobQueueStatus: [String] = []
      if case .failure(let reason) = jobQueues {
        jobQueueStatus = [reason.description]
        FileHandle.standardError.write(Data("\(reason)\n".utf8))
      }
      if !options.json {
        let place = server.map { "a throwaway PostgreSQL (fsync on) at \($0.url)" } ?? url
        print("server: \(place), namespace: \(namespace)\n")
      }
      defer { if options.url != nil { PostgresScenarios.deleteRows(url: url, namespace: namespace) } }

      var runs: [[ScenarioResult]] = []
      for run in 1...options.runs {
        if !options.json && options.runs > 1 { print("── run \(run) of \(options.runs) ──\n") }
        var peerSamples: [String: [Double]] = [:]
        if case .success(let peer) = psycopg {
          do {
            let output = try peer.run(url: url)
            peerSamples = output.samples
            psycopgStatus =
              "psycopg \(output.psycopg) (\(output.implementation), libpq \(output.libpq)), Python \(output.python)"
            if !options.json { print("psycopg peer: \(psycopgStatus)\n") }
          } catch {
            psycopgStatus = "failed: \(error)"
            FileHandle.standardError.write(Data("psycopg peer: failed, its figures are missing: \(error)\n".utf8))
          }
        }
        var jobQueueFigures: [String: JobQueuePeer.Figure] = [:]
        if case .success(let peer) = jobQueues {
          (jobQueueFigures, jobQueueStatus) = peer.runAll(url: url)
          if !options.json { print("job-queue peers: \(jobQueueStatus.joined(separator: "; "))\n") }
        }
        var results = try PostgresScenarios.run(
          url: url, namespace: namespace, psycopg: peerSamples, jobQueues: jobQueueFigures
        ) { result in
          if !options.json { printText(result) }
        }
        if let server {
          // Through a pooler in front of the bench's own server (PgBouncer in session mode).
          if let reason = PgBouncerTestServer.unavailableReason {
            FileHandle.standardError.write(Data("no figures through a pooler: \(reason)\n".utf8))
          } else {
            let bouncer = try PgBouncerTestServer.start(in: server, mode: .session)
            defer { bouncer.remove() }
            if !options.json { print("through PgBouncer in session mode at \(bouncer.url)\n") }
            results += try PostgresScenarios.throughPooler(
              pooledURL: bouncer.url, namespace: namespace, direct: results
            ) { result in
              if !options.json { printText(result) }
            }
            let transactionPooler = try PgBouncerTestServer.start(in: server, mode: .transaction)
            defer { transactionPooler.remove() }
            if !options.json {
              print("through PgBouncer in transaction mode (pool_mode=transaction) at \(transactionPooler.url)\n")
            }
            results += try PostgresScenarios.throughTransactionPooler(
              bouncerURL: transactionPooler.url, namespace: namespace, direct: results
            ) { result in
              if !options.json { printText(result) }
            }
          }
        }
        runs.append(results)
      }
      if options.json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let report = JSONReport(psycopg: psycopgStatus, jobQueues: jobQueueStatus, runs: runs.map(Report.init))
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
      } else if options.runs > 1 {
        printSummary(runs)
      }
    }

    struct JSONReport: Encodable {
      let psycopg: String
      /// The job-queue peers: each library's version, driver and Python, or why they are missing.
      let jobQueues: [String]
      let runs: [Report]
    }

    /// Each figure's median across the runs, with its range, and the same for each ratio.
    private static func printSummary(_ runs: [[ScenarioResult]]) {
      func range(_ values: [Double], _ format: (Double) -> String) -> String {
        guard !values.isEmpty else { return "(missing in a run)".padding(toLength: 36, withPad: " ", startingAt: 0) }
        let sorted = values.sorted()
        let text =
          "\(format(sorted[sorted.count / 2]).leftPad(10)) [\(format(sorted.first!)) – \(format(sorted.last!))]"
        return text.padding(toLength: max(36, text.count + 1), withPad: " ", startingAt: 0)
      }
      func ratio(_ value: Double) -> String { String(format: "%.3g×", value) }
      print("── across \(runs.count) runs: the median of the runs' medians [lowest – highest] ──\n")
      let names: [String] = runs[0].flatMap { [$0.measurement.name] + $0.baselines.map { "  " + $0.name } }
      let longest: Int = names.map(\.count).max() ?? 0
      let width = max(32, longest + 1)
      for result in runs[0] {
        let name = result.measurement.name
        let matching = runs.compactMap { $0.first { $0.measurement.name == name } }
        let figure = { (value: Double) in
          result.unit == "ns" ? nanoseconds(value) : String(format: "%.0f %@", value, result.unit)
        }
        print(
          name.padding(toLength: width, withPad: " ", startingAt: 0)
            + range(matching.map(\.measurement.median), figure))
        for baseline in result.baselines {
          let pairs = matching.compactMap { run in
            run.baselines.first { $0.name == baseline.name }.map { (run.measurement.median, $0.median) }
          }
          print(
            ("  " + baseline.name).padding(toLength: width, withPad: " ", startingAt: 0)
              + range(pairs.map(\.1), figure) + " ratio " + range(pairs.map { $0.0 / $0.1 }, ratio))
        }
        print("")
      }
    }

    private static func nanoseconds(_ value: Double) -> String {
      if value >= 1_000_000 { return String(format: "%.2f ms", value / 1e6) }
      if value >= 10_000 { return String(format: "%.1f µs", value / 1e3) }
      return String(format: "%.0f ns", value)
    }
  }

  /// Why a Python peer cannot run.
  struct PeerUnavailable: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
  }

  /// A peer script of Benchmarks/postgres and the venv's Python that runs it.
  enum PythonPeerScript {
    /// The venv's Python and the script's path, or why they cannot be had. The script is looked
    /// for in the current folder and its parents, then in this program's (`.build/…/liaison-bench`
    /// is inside the package); the venv is `.build-venv` beside it, made by make-venv.sh.
    static func locate(_ script: String, what: String) -> Result<(python: String, script: String), PeerUnavailable> {
      let starts = [
        FileManager.default.currentDirectoryPath,
        URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0]).deletingLastPathComponent().path,
      ]
      for start in starts {
        var folder = URL(fileURLWithPath: start)
        while true {
          if FileManager.default.fileExists(atPath: folder.appendingPathComponent(script).path) {
            let python = folder.appendingPathComponent(".build-venv/bin/python").path
            guard FileManager.default.isExecutableFile(atPath: python) else {
              return .failure(PeerUnavailable("\(what): skipped, run Benchmarks/postgres/make-venv.sh"))
            }
            return .success((python, folder.appendingPathComponent(script).path))
          }
          let parent = folder.deletingLastPathComponent()
          if parent.path == folder.path { break }
          folder = parent
        }
      }
      return .failure(
        PeerUnavailable(
          "\(what): skipped, \(script) not found above \(starts.joined(separator: " or ")); run liaison-bench "
            + "from the package's folder, after Benchmarks/postgres/make-venv.sh"))
    }
  }

  /// Benchmarks/postgres/job_queue_peer.py, run by the venv's Python once per library: the job
  /// queues a Python user would pick instead of a mailbox (Procrastinate, PgQueuer), each with
  /// its workers in other processes, measured by Python itself (the script says what it times).
  struct JobQueuePeer {
    /// The libraries, in the order they run.
    static let libraries = ["procrastinate", "pgqueuer"]

    let python: String
    let script: String

    /// One figure the script prints, a JSON object a line.
    struct Figure: Decodable {
      /// `peer.LIBRARY.latency` (ns), `peer.LIBRARY.throughput` and `….throughput-acked` (jobs/s).
      let name: String
      let unit: String
      let samples: [Double]
      /// The library and its version, the driver under it, and what the worker was set to.
      let library: String
      let driver: String
      let settings: String
      let python: String
    }

    static func locate() -> Result<JobQueuePeer, PeerUnavailable> {
      PythonPeerScript.locate("Benchmarks/postgres/job_queue_peer.py", what: "job-queue peers").map {
        JobQueuePeer(python: $0.python, script: $0.script)
      }
    }

    /// Runs the script for one library to its end (it starts its own worker processes, makes and
    /// drops its own schema; every wait in it has a timeout) and reads its figures.
    func run(library: String, url: String, _ options: [String] = []) throws -> [Figure] {
      let child = try ChildProcess(
        python, [script, "--library", library, "--url", url] + options, input: .discard, output: .pipe,
        errors: .pipe)
      let (output, errors, termination) = child.finish()
      guard termination == .exited(0) else {
        throw BenchError(
          "\(script) --library \(library) \(termination): \(errors.trimmingCharacters(in: .whitespacesAndNewlines))")
      }
      do {
        return try output.split(separator: "\n").map { try JSONDecoder().decode(Figure.self, from: Data($0.utf8)) }
      } catch {
        throw BenchError("\(script) --library \(library) printed lines the bench does not read (\(error)): \(output)")
      }
    }

    /// Runs every library's peer, saying on standard error which failed (their figures are then
    /// missing); returns the figures by name and a line on each library.
    func runAll(url: String) -> (figures: [String: Figure], status: [String]) {
      var figures: [String: Figure] = [:]
      var status: [String] = []
      for library in Self.libraries {
        do {
          let measured = try run(library: library, url: url)
          for figure in measured { figures[figure.name] = figure }
          if let first = measured.first { status.append("\(first.library) on \(first.driver), Python \(first.python)") }
        } catch {
          status.append("\(library): failed")
          FileHandle.standardError.write(Data("\(library) peer: failed, its figures are missing: \(error)\n".utf8))
        }
      }
      return (figures, status)
    }
  }

  /// Benchmarks/postgres/psycopg_peer.py, run by the venv's Python: what a user would otherwise
  /// write with psycopg, measured by Python itself.
  struct PsycopgPeer {
    let python: String
    let script: String

    /// The samples the script prints, in nanoseconds, by name (see the script).
    struct Output: Decodable {
      let python: String
      let psycopg: String
      let implementation: String
      let libpq: Int
      let samples: [String: [Double]]
    }

    /// The peer, or why it cannot run (see ``PythonPeerScript/locate(_:what:)``).
    static func locate() -> Result<PsycopgPeer, PeerUnavailable> {
      PythonPeerScript.locate("Benchmarks/postgres/psycopg_peer.py", what: "psycopg peer").map {
        PsycopgPeer(python: $0.python, script: $0.script)
      }
    }

    /// Runs the script to its end (it starts its own listening process) and reads its JSON.
    func run(url: String) throws -> Output {
      let child = try ChildProcess(python, [script, "--url", url], input: .discard, output: .pipe, errors: .pipe)
      let (output, errors, termination) = child.finish()
      guard termination == .exited(0) else {
        throw BenchError("\(script) \(termination): \(errors.trimmingCharacters(in: .whitespacesAndNewlines))")
      }
      do {
        return try JSONDecoder().decode(Output.self, from: Data(output.utf8))
      } catch {
        throw BenchError("\(script) printed no JSON that the bench reads (\(error)): \(output)")
      }
    }
  }
#else
  enum PostgresBench {
    static func main(_ arguments: [String]) -> Int32 {
      FileHandle.standardError.write(
        Data(
          ("liaison-bench postgres: this bench was built without the package trait `Postgres`; run it with "
            + "`swift run -c release --traits Postgres liaison-bench postgres`\n").utf8))
      return 64
    }
  }
#endif
