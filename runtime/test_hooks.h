// Hooks into a runtime for spool's own tests and tools. Not part of the API.

#ifndef SPOOL_RUNTIME_TEST_HOOKS_H_
#define SPOOL_RUNTIME_TEST_HOOKS_H_

#include <functional>
#include <memory>

#include <spool/runtime.h>

namespace rocksdb {
class Env;
}

namespace spool {

struct TestHooks {
  // Runs on the writer's thread before each commit (e.g. to stall it).
  std::function<void()> before_commit;
  // Replaces the storage environment (e.g. with fault injection). Not owned.
  rocksdb::Env* env = nullptr;
};

// Runtime::Open with hooks.
Status OpenWithHooks(const Options& options, TestHooks hooks,
                     std::unique_ptr<Runtime>* runtime);

}  // namespace spool

#endif  // SPOOL_RUNTIME_TEST_HOOKS_H_
