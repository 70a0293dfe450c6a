import Foundation
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

/// What a receiver does with messages it could not handle: after an app update, a closed
/// receiver, a message handed back.
@Suite("Mailbox recovery")
struct MailboxRecoveryTests {
  let directory = TemporaryDirectory()

  /// A closed receiver says so: `closed`, not `suspended` (which is the container's state, and
  /// whose advice, resume, does not apply); a suspended one still says `suspended`.
  @Test func aClosedReceiverThrowsClosedAndASuspendedOneSuspended() async throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try container.mailbox("closing")
    let receiver = try mailbox.receiver()
    let waiting = Task { try await receiver.receive(String.self) }
    receiver.close()
    let woken = await #expect(throws: LiaisonError.self) { try await waiting.value }
    #expect(woken?.code == .closed)
    let later = #expect(throws: LiaisonError.self) { try receiver.receiveAvailable(String.self) }
    #expect(later?.code == .closed)
    #expect(later?.message.contains("was closed") == true)
    #expect(later?.message.contains("suspended") == false)
    #expect(throws: LiaisonError.self) { try receiver.removeQuarantined() }

    let next = try mailbox.receiver()
    container.suspend()
    let suspended = #expect(throws: LiaisonError.self) { try next.receiveAvailable(String.self) }
    #expect(suspended?.code == .suspended)
    try container.resume()
  }
}
