// swift-tools-version: 6.1
// A package as a user writes it from the README's installation snippet: CI builds and runs it
// (.ci/run), so that the snippet's lines, the four library products and the trait `Postgres`
// are proven to work from outside.
//
// The one difference: the README's `.package(url: "https://github.com/…/Liaison", from: "…",
// traits: ["Postgres"])` cannot be resolved from a clone without a release, so this depends on the
// clone it sits in, by path. `name:` gives it the identity "Liaison" that the URL would, whatever
// the clone's folder is called.
import PackageDescription

let package = Package(
  name: "Consumer",
  platforms: [.macOS(.v13), .iOS(.v16)],
  dependencies: [
    .package(name: "Liaison", path: "../..", traits: ["Postgres"])
  ],
  targets: [
    .executableTarget(
      name: "Consumer",
      dependencies: [
        .product(name: "Liaison", package: "Liaison"),
        .product(name: "LiaisonStore", package: "Liaison"),
        .product(name: "LiaisonPostgres", package: "Liaison"),
        .product(name: "LiaisonSwiftUI", package: "Liaison"),
      ]
    )
  ]
)
