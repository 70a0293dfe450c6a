// What the Darwin model (Tests/DarwinModel) needs from glibc that Swift's Glibc module leaves out.
#ifndef CDARWINMODEL_H
#define CDARWINMODEL_H

#include <pthread.h>
#include <stddef.h>
#include <sys/xattr.h>  // the model's protection classes are extended attributes (DataProtection.swift)

/// The name of `thread` (`pthread_getname_np`, a GNU extension), into `buffer`; 0 or an errno.
int darwin_model_thread_name(pthread_t thread, char *buffer, size_t length);

#endif
