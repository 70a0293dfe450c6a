// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
  .swiftLanguageMode(.v6)
]

let package = Package(
  name: "Liaison",
  platforms: [.macOS(.v13), .iOS(.v16), .watchOS(.v9), .tvOS(.v16), .visionOS(.v1)],
  // What a package that depends on Liaison can use. The benchmark (`liaison-bench`, with the chaos
  // runs), the test peer and the fuzzer are executable targets with no product: SwiftPM gives each
  // executable target of the root package a product of its own, so `swift run liaison-bench` works
  // here, and none to a package that depends on this one, which never builds them nor
  // LiaisonTestSupport (under Tests/). Not a nested package, as swift-nio keeps its benchmarks: the
  // benchmark needs ChildProcesses, KernelLockTable and LiaisonTestSupport, which a nested package
  // could reach only as products of this one, and it would build swift-nio and GRDB again.
  products: [
    .library(name: "Liaison", targets: ["Liaison"]),
    .library(name: "LiaisonStore", targets: ["LiaisonStore"]),
    .library(name: "LiaisonPostgres", targets: ["LiaisonPostgres"]),
    .library(name: "LiaisonSwiftUI", targets: ["LiaisonSwiftUI"]),
    .executable(name: "liaison", targets: ["liaison"]),
  ],
  traits: [
    .trait(
      name: "Postgres",
      description: "Builds LiaisonPostgres on postgres-nio: locks, presences and signals shared through PostgreSQL."
    ),
    .trait(
      name: "DarwinModel",
      description:
        "For Liaison's own CI only, never in an app: compiles Liaison's Apple code on Linux against a model of the "
        + "Darwin calls it makes (Tests/DarwinModel), in place of its Linux code."
    ),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    // For the tests' own event loop group (NIOPosix); postgres-nio depends on it already.
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    // `swift package generate-documentation`: the DocC catalogs in Sources/*/*.docc (.ci/run).
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
  ],
  targets: [
    // Linux calls Swift cannot reach directly (variadic syscall, eventfd).
    .target(name: "CLiaison"),
    .target(
      name: "Liaison",
      dependencies: [
        "CLiaison", .product(name: "SystemPackage", package: "swift-system"),
        // Only with the trait DarwinModel, which only Liaison's CI enables: what ships never has it.
        .target(name: "DarwinModel", condition: .when(traits: ["DarwinModel"])),
      ],
      swiftSettings: strictSettings
    ),
    // Shared defaults, mailboxes and databases: Liaison plus SQLite (GRDB). Users who need only
    // locks, presences and signals do not link SQLite.
    .target(
      name: "LiaisonStore",
      dependencies: [
        "Liaison", "CLiaison", .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "SystemPackage", package: "swift-system"),
        // SQLite's C interface, for the hot paths' prepared statements (PreparedStatements.swift).
        .product(name: "GRDBSQLite", package: "GRDB.swift"),
      ],
      swiftSettings: strictSettings
    ),
    // The same parts across machines, on PostgreSQL. Empty unless the package trait `Postgres`
    // is enabled, so that apps that do not use it never build postgres-nio and swift-nio.
    .target(
      name: "LiaisonPostgres",
      dependencies: [
        "Liaison",
        .product(name: "SystemPackage", package: "swift-system"),
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
      ],
      swiftSettings: strictSettings
    ),
    // The view properties: a shared value, presence, signal or inbox in one line of a SwiftUI view,
    // from iOS 16. On Apple platforms it imports SwiftUI; on Linux, where SwiftUI does not exist,
    // it compiles against SwiftUIModel, so that CI builds and tests the code that ships.
    .target(
      name: "LiaisonSwiftUI",
      dependencies: [
        "Liaison", "LiaisonStore",
        .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
      ],
      swiftSettings: strictSettings
    ),
    // A model of the SwiftUI declarations LiaisonSwiftUI uses, and of a view's update cycle: Linux
    // only (see Sources/SwiftUIModel/SwiftUIModel.swift).
    .target(name: "SwiftUIModel", swiftSettings: strictSettings),
    // What the `liaison` command parses from its arguments, kept out of the executable so that
    // the tests and the fuzzer reach it.
    .target(
      name: "LiaisonCommandLine",
      dependencies: ["Liaison"],
      swiftSettings: strictSettings
    ),
    // Starting child processes as ordinary members of the caller's process group, with no signal
    // blocked: one way for the demo, the benchmark and the tests.
    .target(name: "ChildProcesses", dependencies: ["CLiaison"], swiftSettings: strictSettings),
    // Reading the kernel's table of file locks (`/proc/locks`): how the benchmark and the tests
    // know that a waiter is asleep in the kernel.
    .target(name: "KernelLockTable", swiftSettings: strictSettings),
    .executableTarget(
      name: "liaison",
      dependencies: [
        "CLiaison",
        "Liaison",
        "ChildProcesses",
        "LiaisonCommandLine",
        "LiaisonStore",
        // The demo's view scene; on Linux its view runs in SwiftUIModel.
        "LiaisonSwiftUI",
        .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
        // `--postgres`: the commands on PostgreSQL, with the package trait `Postgres`.
        "LiaisonPostgres",
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      exclude: ["README.md"],  // the command's manual
      swiftSettings: strictSettings
    ),
    .executableTarget(
      name: "liaison-bench",
      dependencies: [
        "Liaison", "LiaisonStore", "KernelLockTable", "ChildProcesses", "LiaisonPostgres", "LiaisonSwiftUI",
        "LiaisonTestSupport", .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
        .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
      ],
      exclude: ["README.md"],  // what the benchmark measures, and its figures
      swiftSettings: strictSettings
    ),
    // The "other process" that the tests spawn: it holds, waits, claims and crashes on command.
    .executableTarget(
      name: "LiaisonTestPeer",
      dependencies: [
        "Liaison", "LiaisonStore", "LiaisonPostgres", "LiaisonTestSupport",
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
      ],
      swiftSettings: strictSettings
    ),
    // The fuzzer's targets: the name rule, every record read from disk, what the CLI parses. Built
    // with `-sanitize=fuzzer` by .ci/fuzz, libFuzzer drives them; an ordinary build replays
    // input files through them (see the README, "What CI verifies").
    .executableTarget(
      name: "LiaisonFuzz",
      dependencies: [
        "Liaison", "LiaisonStore", "LiaisonCommandLine", .product(name: "GRDB", package: "GRDB.swift"),
      ],
      exclude: ["Corpus"],
      swiftSettings: strictSettings
    ),
    // Spawning and driving the test peer, temporary containers, waiting for a condition, throwaway
    // PostgreSQL servers and network namespaces: shared by the tests, their peer and the benchmark
    // (none of them a product; .ci/check-products checks that no product reaches it).
    .target(
      name: "LiaisonTestSupport",
      dependencies: [
        "ChildProcesses", "KernelLockTable", "CLiaison", "Liaison",
        .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
      ],
      path: "Tests/LiaisonTestSupport",
      swiftSettings: strictSettings
    ),
    // A model of the Darwin calls that Liaison's Apple code makes (notify(3), Dispatch's vnode and
    // process sources, flock's NOTE_FUNLOCK, pthread_kill to a workqueue thread), so that this code
    // runs on Linux: `swift test --traits DarwinModel` (.ci/run). See Tests/DarwinModel/DarwinModel.swift.
    .target(
      name: "DarwinModel",
      dependencies: ["CLiaison", "CDarwinModel", "KernelLockTable"],
      path: "Tests/DarwinModel",
      swiftSettings: strictSettings
    ),
    .target(name: "CDarwinModel", path: "Tests/CDarwinModel"),
    .testTarget(
      name: "LiaisonTests",
      dependencies: [
        "Liaison", "LiaisonTestSupport", "LiaisonTestPeer",
        .target(name: "DarwinModel", condition: .when(traits: ["DarwinModel"])),
      ],
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "LiaisonStoreTests",
      dependencies: [
        "LiaisonStore", "LiaisonTestSupport", "LiaisonTestPeer", .product(name: "GRDB", package: "GRDB.swift"),
      ],
      swiftSettings: strictSettings
    ),
    // Every part on PostgreSQL, against throwaway servers the tests start themselves (built with the
    // package trait `Postgres`).
    .testTarget(
      name: "LiaisonPostgresTests",
      dependencies: [
        "Liaison", "LiaisonStore", "LiaisonPostgres", "LiaisonSwiftUI", "LiaisonTestSupport", "LiaisonTestPeer",
        .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
        .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Postgres"])),
      ],
      swiftSettings: strictSettings
    ),
    // The view properties, hosted in SwiftUI's model, against other processes' writes.
    .testTarget(
      name: "LiaisonSwiftUITests",
      dependencies: [
        "LiaisonSwiftUI", "LiaisonStore", "LiaisonTestSupport", "LiaisonTestPeer",
        .target(name: "SwiftUIModel", condition: .when(platforms: [.linux])),
      ],
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "CLITests",
      dependencies: [
        "LiaisonTestSupport", "liaison", "Liaison", "LiaisonStore", .product(name: "GRDB", package: "GRDB.swift"),
      ],
      swiftSettings: strictSettings
    ),
  ]
)
