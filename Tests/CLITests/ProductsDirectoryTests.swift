import Foundation
import LiaisonTestSupport
import Testing

/// How the tests find the test peer and the `liaison` command: on macOS without `/proc`, and
/// whatever loaded the tests (`xctest`, `swiftpm-testing-helper`, or the tests' own executable).
@Suite("The products folder")
struct ProductsDirectoryTests {
  @Test func theWayMacOSFindsItFindsTheFolderOfThePeerAndTheCommand() throws {
    let found = locateProductsDirectory()
    #expect(FileManager.default.isExecutableFile(atPath: found.appendingPathComponent("LiaisonTestPeer").path))
    #expect(FileManager.default.isExecutableFile(atPath: found.appendingPathComponent("liaison").path))
    #expect(found.resolvingSymlinksInPath().path == productsDirectory().resolvingSymlinksInPath().path)
  }
}
