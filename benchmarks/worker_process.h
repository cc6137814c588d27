// Runs one system's scenario in a child process: spool-bench re-executes
// itself with a hidden --worker flag and reads the rows the child writes to
// a pipe (the line protocol of bench_util.h). Separate processes keep one
// system's threads, memory and page-cache habits from disturbing another's,
// and turn a crash or a hang into a reported failure instead of the end of
// the run.

#ifndef SPOOL_BENCHMARKS_WORKER_PROCESS_H_
#define SPOOL_BENCHMARKS_WORKER_PROCESS_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "benchmarks/bench_util.h"

namespace spool::bench {

struct WorkerResult {
  std::vector<Row> rows;
  std::vector<std::string> notes;
  std::vector<std::string> errors;
  // key -> value, from 'I' lines ("describe", "skipped").
  std::map<std::string, std::string> info;
  // Empty when the child exited with status 0; otherwise how it ended:
  // "exited with status 1", "killed by signal 11", "timed out after 300 s".
  std::string failure;
  double seconds = 0;
};

// Runs `/proc/self/exe` with `args` (argv[1..]) plus "--worker-fd N" in a
// process group of its own, collects its lines until it exits, and kills the
// group if it runs longer than `timeout`. The child's stdout goes to our
// stderr, so that nothing it prints can mix with the report.
WorkerResult RunWorkerProcess(const std::vector<std::string>& args,
                              std::chrono::seconds timeout);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_WORKER_PROCESS_H_
