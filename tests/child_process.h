// ChildProcess: runs a program with its stdout on a pipe, for tests that
// kill processes with SIGKILL.

#ifndef SPOOL_TESTS_CHILD_PROCESS_H_
#define SPOOL_TESTS_CHILD_PROCESS_H_

#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace spool::testing {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`. Throws std::runtime_error if it cannot.
  explicit ChildProcess(const std::vector<std::string>& argv);
  // Kills the child if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line of the child's stdout, without the newline; empty when the
  // child closed stdout or `timeout` passed first.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);

  // Sends SIGKILL and reaps the child.
  void Kill();

  // Sends `signal` (e.g. SIGSTOP, SIGCONT); does not reap.
  void Signal(int signal);

  // Waits for the child to exit on its own; returns its wait status, or
  // nothing when `timeout` passed first.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
};

}  // namespace spool::testing

#endif  // SPOOL_TESTS_CHILD_PROCESS_H_
