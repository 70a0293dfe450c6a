// The declarations are in include/CLiaison.h; SwiftPM needs one source file per C target.

#include "CLiaison.h"

#if defined(__linux__)
#include <pthread.h>
#include <unistd.h>

/// 0 until read, and again in a child after `fork` (which runs only the forking thread, so no
/// other thread stores the parent's id there meanwhile).
static int cached_process_id;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void forget_process_id(void) { __atomic_store_n(&cached_process_id, 0, __ATOMIC_RELAXED); }
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_process_id); }

int cliaison_process_id(void) {
  int pid = __atomic_load_n(&cached_process_id, __ATOMIC_RELAXED);
  if (pid != 0) return pid;
  pthread_once(&fork_handler_once, register_fork_handler);
  pid = getpid();
  __atomic_store_n(&cached_process_id, pid, __ATOMIC_RELAXED);
  return pid;
}
#endif
