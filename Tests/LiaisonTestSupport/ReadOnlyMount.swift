// A folder seen read-only: a read-only bind mount of it, as a keyboard extension without Full
// Access sees its App Group container (it may read the files the app wrote, and write none).

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A read-only view of a folder: `mount --bind SOURCE VIEW`, then `mount -o remount,bind,ro VIEW`.
/// Through ``path`` every write fails with `EROFS`; the writers' changes through the source's
/// path are seen at once (same files: their locks, inotify watches and `flock`s are shared).
///
/// ```swift
/// @Test(.enabled(if: ReadOnlyMount.mustRun, "needs root (a read-only bind mount)"))
/// func readersWork() throws {
///   let app = TemporaryDirectory()
///   // … the app writes its container at app.path …
///   let view = try ReadOnlyMount(of: app.path)
///   defer { view.unmount() }
///   let keyboard = try Peer(container: view.path)
/// }
/// ```
///
/// Needs Linux and root (`CAP_SYS_ADMIN`). Guarantees: unmounted by ``unmount()`` and by
/// `deinit`, lazily (`umount -l`) if a process still has a file open under it.
public final class ReadOnlyMount: @unchecked Sendable {
  /// The read-only view of the folder.
  public let path: String
  private let view: TemporaryDirectory
  private var mounted = true

  /// Why no read-only bind mount can be made here, or `nil` when one can: not Linux, not root,
  /// or the kernel refuses (a container without `CAP_SYS_ADMIN`).
  public static let unavailableReason: String? = {
    guard isLinux else { return "read-only bind mounts are made on Linux only" }
    guard isRoot else { return "a bind mount needs root (CAP_SYS_ADMIN)" }
    let source = TemporaryDirectory()
    do {
      let probe = try ReadOnlyMount(of: source.path)
      probe.unmount()
      return nil
    } catch {
      return "a read-only bind mount failed: \(error)"
    }
  }()

  /// Whether the tests that need a read-only mount must run: one can be made, or this is CI
  /// (`CI=true`), where such a test runs and fails with ``unavailableReason`` instead of being
  /// skipped.
  public static var mustRun: Bool { unavailableReason == nil || runsInCI }

  /// Mounts `source` read-only at a new temporary folder.
  public init(of source: String) throws {
    view = TemporaryDirectory()
    path = view.path
    _ = try runCommand(["/bin/mount", "--bind", source, path])
    do {
      _ = try runCommand(["/bin/mount", "-o", "remount,bind,ro", path])
    } catch {
      _ = try? runCommand(["/bin/umount", path])
      mounted = false
      throw error
    }
  }

  /// Unmounts the view; calling it again does nothing.
  public func unmount() {
    guard mounted else { return }
    mounted = false
    if (try? runCommand(["/bin/umount", path])) == nil { _ = try? runCommand(["/bin/umount", "-l", path]) }
  }

  deinit { unmount() }
}

/// Makes the system refuse every write to a file or folder until ``end()`` (or `deinit`), as a
/// sandbox refuses a keyboard extension's writes to its App Group container: by the file's
/// permissions (0400, 0500: `EACCES`), or, for root, whom permissions do not stop, by Linux's
/// immutable attribute (`chattr +i`: `EPERM`).
public final class WriteRefusal: @unchecked Sendable {
  /// The error the system gives a write: `EPERM` for root, `EACCES` otherwise.
  public let errno: CInt
  private let path: String
  private let mode: mode_t
  private var refusing = true

  public init(_ path: String) throws {
    self.path = path
    var info = stat()
    guard stat(path, &info) == 0 else { throw PeerError("cannot stat \(path)") }
    mode = info.st_mode & 0o7777
    if isRoot {
      _ = try runCommand(["/usr/bin/chattr", "+i", path])
      errno = EPERM
    } else {
      guard chmod(path, info.st_mode & S_IFMT == S_IFDIR ? 0o500 : 0o400) == 0 else {
        throw PeerError("cannot chmod \(path)")
      }
      errno = EACCES
    }
  }

  /// Lets writes through again; calling it again does nothing.
  public func end() {
    guard refusing else { return }
    refusing = false
    if isRoot { _ = try? runCommand(["/usr/bin/chattr", "-i", path]) } else { chmod(path, mode) }
  }

  deinit { end() }
}
