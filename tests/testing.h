// Helpers for spool's tests: temporary directories and bounded waits.

#ifndef SPOOL_TESTS_TESTING_H_
#define SPOOL_TESTS_TESTING_H_

#include <chrono>
#include <functional>
#include <string>

namespace spool::testing {

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
