#ifdef __linux__
#define _GNU_SOURCE
#include "CDarwinModel.h"

int darwin_model_thread_name(pthread_t thread, char *buffer, size_t length) {
  return pthread_getname_np(thread, buffer, length);
}
#endif
