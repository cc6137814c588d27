// What the child processes of the tests (crash_child, live_queue_child)
// say to their parent: lines on stdout, and a fatal error on stderr.

#ifndef SPOOL_TESTS_CHILD_OUTPUT_H_
#define SPOOL_TESTS_CHILD_OUTPUT_H_

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include <spool/status.h>

namespace spool::testing {

// Writes `line` and a newline to stdout in one write: atomic on a pipe, and
// not buffered in the process, so the parent has it even if a SIGKILL
// follows.
inline void Say(const std::string& line) {
  std::string out = line + "\n";
  ssize_t ignored = write(STDOUT_FILENO, out.data(), out.size());
  (void)ignored;
}

// Reports `s` on stderr, prefixed with the program's name, and exits 2.
[[noreturn]] inline void Die(const Status& s) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name,
               s.ToString().c_str());
  std::exit(2);
}

}  // namespace spool::testing

#endif  // SPOOL_TESTS_CHILD_OUTPUT_H_
