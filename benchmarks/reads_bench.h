// The read side's measurements: point gets across the reader pool, JSON
// listings, watch fan-out, and the CPU a query costs the caller's thread.
//
// A library function, so that spool-bench can run these scenarios next to
// its own; spool-reads-bench (reads_bench_main.cc) runs them alone and prints
// CSV rows: scenario,system,variant,metric,value,unit. Every figure is the
// median of `rounds` rounds; `<metric>_min` and `<metric>_max` rows give the
// spread.

#ifndef SPOOL_BENCHMARKS_READS_BENCH_H_
#define SPOOL_BENCHMARKS_READS_BENCH_H_

#include <functional>
#include <string>
#include <vector>

#include <spool/options.h>
#include <spool/status.h>

namespace spool::bench {

// One result row.
struct ReadsRow {
  std::string scenario;
  std::string system = "spool";
  std::string variant;
  std::string metric;
  double value = 0;
  std::string unit;
};

struct ReadsBenchOptions {
  // A scratch directory, which must exist; each scenario uses a fresh
  // sub-directory and removes it.
  std::string dir;
  // Rounds per figure; medians are reported. Default: 5.
  int rounds = 5;
  // Fewer operations per round, for smoke tests. Default: false.
  bool quick = false;
  // Storage durability of the runtimes measured. Default: kRelaxed (reads
  // do not depend on it; the watch scenario's writes do).
  Durability durability = Durability::kRelaxed;
  // Reader actors. Default: 2 (the runtime's default).
  int readers = 2;
  // Scenarios to run, by name: "point_get", "list_json", "watch_fanout",
  // "caller_cpu". Empty: all.
  std::vector<std::string> scenarios;
};

// The scenario names RunReadsBenchmarks knows.
std::vector<std::string> ReadsScenarioNames();

// Runs the scenarios and calls `emit` for every row, as soon as a scenario
// is done. Returns the first error (the rows emitted so far stay valid).
Status RunReadsBenchmarks(const ReadsBenchOptions& options,
                          const std::function<void(const ReadsRow&)>& emit);

// `row` as one CSV line (no newline); fields with commas or quotes are
// quoted.
std::string ReadsRowCsv(const ReadsRow& row);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_READS_BENCH_H_
