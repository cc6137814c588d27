#include "tests/runtime_testing.h"

namespace spool::testing {

std::unique_ptr<Runtime> OpenOrDie(const Options& options) {
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return runtime;
}

Status Ok(TaskContext&) { return Status::OK(); }

}  // namespace spool::testing
