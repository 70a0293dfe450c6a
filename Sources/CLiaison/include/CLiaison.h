// C calls that Swift cannot reach directly: variadic `syscall(2)` and headers Glibc's Swift
// module leaves out. Linux only; empty elsewhere.
#ifndef CLIAISON_H
#define CLIAISON_H

// Before any system header, so that glibc declares its GNU extensions (pthread_setname_np).
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif

#include <stdint.h>

/// Atomic load (acquire) of a 64-bit word that other processes may update (shared memory).
static inline uint64_t cliaison_atomic_load(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

/// Atomic increment (acquire-release) of a 64-bit word in shared memory; returns the new value.
static inline uint64_t cliaison_atomic_increment(uint64_t *word) { return __atomic_add_fetch(word, 1, __ATOMIC_ACQ_REL); }

/// Atomic store (release) of a 64-bit word that other processes may read (shared memory).
static inline void cliaison_atomic_store(uint64_t *word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/// Atomic load of a 32-bit word shared with a signal handler (lock-free, async-signal-safe).
static inline int32_t cliaison_signal_word_load(const int32_t *word) { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }

/// Atomic store of a 32-bit word shared with a signal handler (lock-free, async-signal-safe).
static inline void cliaison_signal_word_store(int32_t *word, int32_t value) {
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}

#if defined(__linux__)
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

/// An eventfd, non-blocking and close-on-exec: the event loop's wake-up.
static inline int cliaison_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

/// A pipe whose ends are close-on-exec from the start (no window in which a child started by
/// another thread could inherit them).
static inline int cliaison_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/// Names the calling thread (at most 15 characters), for /proc and debuggers.
static inline void cliaison_name_thread(const char *name) { pthread_setname_np(pthread_self(), name); }

/// An open-file-description write lock on the first byte of the file open on `fd`, not
/// waiting: 0 when taken, -1 with `errno` otherwise. Such a lock lives, as a `flock` does, until
/// the last descriptor of the open file is closed, and unlike a `flock` it can be tested without
/// being taken (`cliaison_ofd_is_locked`). Independent of `flock` locks on the same file.
static inline int cliaison_ofd_lock(int fd) {
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 0};
  return fcntl(fd, F_OFD_SETLK, &lock);
}

/// Releases the lock of `cliaison_ofd_lock`.
static inline int cliaison_ofd_unlock(int fd) {
  struct flock lock = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 0};
  return fcntl(fd, F_OFD_SETLK, &lock);
}

/// Whether another open file holds the lock of `cliaison_ofd_lock` on the file open on `fd`
/// (1 or 0), taking nothing; -1 with `errno` when it cannot be told.
static inline int cliaison_ofd_is_locked(int fd) {
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 0};
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return -1;
  return lock.l_type != F_UNLCK;
}

/// `pidfd_open(2)`: a descriptor that becomes readable when the process `pid` has exited.
static inline int cliaison_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

/// `length` random bytes from the kernel's generator in one `getrandom(2)` (Swift's
/// `SystemRandomNumberGenerator` makes one call per 8 bytes); how many it wrote, -1 on error.
static inline long cliaison_random(void *buffer, unsigned long length) {
  return (long)syscall(SYS_getrandom, buffer, length, 0);
}

/// The process's id, asked of the kernel once and again in a child after `fork`: glibc no longer
/// caches `getpid`, which is a system call at each signal post otherwise.
int cliaison_process_id(void);
#endif

#endif
