// C calls that Swift cannot reach directly: variadic `syscall(2)` and headers Glibc's Swift
// module leaves out. Linux only; empty elsewhere.
#ifndef CLIAISON_H
#define CLIAISON_H

#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/// An eventfd, non-blocking and close-on-exec: the event loop's wake-up.
static inline int cliaison_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

/// Names the calling thread (at most 15 characters), for /proc and debuggers.
static inline void cliaison_name_thread(const char *name) { pthread_setname_np(pthread_self(), name); }

/// `pidfd_open(2)`: a descriptor that becomes readable when the process `pid` has exited.
static inline int cliaison_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}
#endif

#endif
