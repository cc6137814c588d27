// Helpers for every suite of spool's tests, util's included: temporary
// directories and bounded waits. Stored tasks for storage's and actors'
// tests are in tests/store_testing.h; helpers that open a runtime are in
// tests/runtime_testing.h.

#ifndef SPOOL_TESTS_TESTING_H_
#define SPOOL_TESTS_TESTING_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <spool/future.h>
#include <spool/status.h>

#include <gtest/gtest.h>

namespace spool::testing {

// The default bound on a test's wait for a future: a hang fails the test
// instead of stalling the suite.
inline constexpr std::chrono::seconds kTestWait{60};

// Waits for a future and returns a copy of its result (the future may be a
// temporary). A wait that runs out fails the test and returns TimedOut.
template <class T>
Result<T> Await(const Future<T>& future,
                std::chrono::milliseconds timeout = kTestWait) {
  if (!future.WaitFor(timeout)) {
    ADD_FAILURE() << "timed out waiting for a future";
    return Status::TimedOut("test wait");
  }
  return future.Wait();
}

// A directory under $TMPDIR (or /tmp), removed with its contents when the
// object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Sub(const std::string& name) const;

 private:
  std::string path_;
};

// Polls `condition` until it holds or `timeout` passes; returns whether it
// held. Tests use it instead of sleeping so that a hang fails.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace spool::testing

#endif  // SPOOL_TESTS_TESTING_H_
