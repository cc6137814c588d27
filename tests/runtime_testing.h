// Helpers for the tests that open a runtime, on top of tests/testing.h.

#ifndef SPOOL_TESTS_RUNTIME_TESTING_H_
#define SPOOL_TESTS_RUNTIME_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include <spool/runtime.h>

#include "tests/testing.h"

namespace spool::testing {

// Opens a runtime; a failed open fails the test and returns null.
std::unique_ptr<Runtime> OpenOrDie(const Options& options);

// A handler that succeeds at once.
Status Ok(TaskContext& task);

// The names of the files under `dir` (recursively) whose bytes contain
// `marker`: where a secret would show in plaintext.
std::vector<std::string> FilesContaining(const std::string& dir,
                                         const std::string& marker);

}  // namespace spool::testing

#endif  // SPOOL_TESTS_RUNTIME_TESTING_H_
