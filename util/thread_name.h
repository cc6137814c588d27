// Names the calling thread, so that `top -H`, perf and gdb show which of
// spool's detached actors a thread runs ("spool-writer", "spool-worker-3").

#ifndef SPOOL_UTIL_THREAD_NAME_H_
#define SPOOL_UTIL_THREAD_NAME_H_

#include <pthread.h>
#include <string>

namespace spool {

// Linux keeps the first 15 bytes of the name.
inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace spool

#endif  // SPOOL_UTIL_THREAD_NAME_H_
