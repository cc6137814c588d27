// Shared pieces of spool-bench: result rows, statistics, clocks, scratch
// directories, the plan (how big each scenario is), and the line protocol a
// worker process uses to hand its rows to the parent.
//
// Every system is measured in a worker process of its own (spool-bench
// re-executes itself with --worker). The worker writes one line per result to
// a pipe; the parent collects them. Lines, not JSON, because a worker that
// crashes half-way must still leave every complete line readable.

#ifndef SPOOL_BENCHMARKS_BENCH_UTIL_H_
#define SPOOL_BENCHMARKS_BENCH_UTIL_H_

#include <chrono>
#include <cstdarg>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>

namespace spool::bench {

using SteadyClock = std::chrono::steady_clock;

// The scenarios, in the order they run and are reported.
inline const std::vector<std::string>& AllScenarios() {
  static const std::vector<std::string> kScenarios = {
      "enqueue", "drain",      "recovery",  "long_history", "caller_thread",
      "reads",   "statistics", "retention", "backup",       "codec"};
  return kScenarios;
}

// The peers, in the order they run and are reported. The first two are
// limits, not queues.
inline const std::vector<std::string>& AllPeers() {
  static const std::vector<std::string> kPeers = {
      "fsync",       "rocksdb_raw", "sqlite",  "redis",
      "redis_plain", "beanstalkd",  "postgres"};
  return kPeers;
}

inline bool IsLimitPeer(std::string_view name) {
  return name == "fsync" || name == "rocksdb_raw";
}

// One figure. `scenario` is what the JSON output shows ("limit" for the
// limit peers); `group` is the scenario that produced it, which the report
// uses to put a limit's figure beside spool's.
struct Row {
  std::string scenario;
  std::string system;
  std::string variant;
  std::string metric;
  double value = 0;
  std::string unit;
  std::string group;
};

// The median of `values`; 0 for none. Averages the middle two of an even
// count.
double Median(std::vector<double> values);

// A set of samples (latencies, CPU times), in microseconds.
class Samples {
 public:
  void Reserve(size_t n) { values_.reserve(n); }
  void Add(double value) {
    values_.push_back(value);
    sorted_ = false;
  }
  void Append(const Samples& other);
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  // Nearest-rank percentile, p in (0, 100]; 100 is the maximum. 0 for none.
  double Percentile(double p);
  double Max() { return Percentile(100); }

 private:
  std::vector<double> values_;
  bool sorted_ = true;
};

double MicrosBetween(SteadyClock::time_point from, SteadyClock::time_point to);
double MillisBetween(SteadyClock::time_point from, SteadyClock::time_point to);

// CPU time consumed so far by the calling thread
// (CLOCK_THREAD_CPUTIME_ID), in microseconds.
double ThreadCpuMicros();

// Where scratch directories go: $TMPDIR, else /tmp.
std::string BaseTempDir();

// A fresh, empty directory under BaseTempDir(), removed with its contents on
// destruction. Its permissions are 0755 so that a server that drops
// privileges (postgres) can reach its data directory.
class ScratchDir {
 public:
  explicit ScratchDir(std::string_view prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The sizes of every scenario. --quick shrinks them so that the whole suite,
// peers included, runs in about a minute.
struct Plan {
  bool quick = false;
  // Rounds per scenario; each round on fresh directories.
  int rounds = 5;
  // Awaited enqueues per round before the measured ones; not recorded.
  int warmup_calls = 100;
  // Sequential awaited enqueues per round (latency percentiles).
  int sequential_enqueues = 2000;
  // Concurrent callers, each enqueueing and awaiting in a loop.
  std::vector<int> callers = {1, 8, 64};
  // Throughput is counted in a window that starts after a warm-up.
  double caller_warmup_s = 0.2;
  double caller_window_s = 1.0;
  // Stored tasks drained per round, at concurrency 1 and N.
  int drain_tasks = 5000;
  // The large drain of the runtime-core issue (spool only); 0 skips it.
  int big_drain_tasks = 100000;
  int big_drain_rounds = 3;
  // Recovery: stored tasks, of which `recovery_running` were left running.
  int recovery_tasks = 10000;
  int recovery_running = 1000;
  // Long history: finished tasks, then pending ones.
  int history_done = 100000;
  int history_pending = 1000;
  // Delayed tasks in the scheduler's queue (10,000 groups) for the
  // selection measure of issue 3.
  int delayed_tasks = 100000;
  // Next-task selections, timed in batches.
  int selections = 1000;
  int selection_batch = 10;
  // Calls measured per round for the caller-thread CPU time.
  int cpu_calls = 2000;
  // Google Benchmark: minimum time per benchmark and repetition, seconds.
  double codec_min_time_s = 0.2;
  // Every task: this type, and a payload of this many bytes.
  size_t payload_bytes = 100;
};

// The plan for a full or a quick run; `rounds` > 0 overrides the rounds.
Plan MakePlan(bool quick, int rounds);

// "2,000"
// Whether `text` ends with `suffix`.
bool EndsWith(std::string_view text, std::string_view suffix);

std::string WithCommas(long long value);

// A number for tables: 3 significant digits, thousands separators for large
// values, no exponent.
std::string FormatValue(double value);

// Writes a progress line to stderr: "[spool-bench] ...". Thread safe.
void Progress(const char* format, ...) __attribute__((format(printf, 1, 2)));

// ---- The worker's line protocol ----
//
//   R <tab> scenario <tab> system <tab> variant <tab> metric <tab> value
//     <tab> unit <tab> group                              a result row
//   N <tab> text                                          a note
//   I <tab> key <tab> value                               information
//   E <tab> text                                          an error
//
// Fields never contain tabs or newlines (they are replaced by spaces).

// Writes protocol lines to a file descriptor. Thread safe.
class Reporter {
 public:
  // fd < 0: lines are dropped (used when a scenario runs in-process).
  explicit Reporter(int fd) : fd_(fd) {}

  void AddRow(const Row& row);
  void Note(std::string_view text);
  void Info(std::string_view key, std::string_view value);
  void Error(std::string_view text);

  bool failed() const { return failed_; }

 private:
  void WriteLine(const std::vector<std::string_view>& fields);

  int fd_;
  std::mutex mutex_;
  bool failed_ = false;
};

// What a parsed protocol line holds.
struct ProtocolLine {
  char kind = 0;  // 'R', 'N', 'I', 'E'; 0 for a malformed line.
  Row row;
  std::string key;
  std::string text;
};
ProtocolLine ParseProtocolLine(std::string_view line);

// Reports `status` as an error and ends the process at once, without running
// destructors: used when a wait ran out, because a runtime or server that
// hangs cannot be closed, and closing it would hang the worker too.
[[noreturn]] void Abandon(Reporter* out, const Status& status);

// The result of RunCallers.
struct CallerRun {
  // Calls completed inside the window, per second.
  double ops_per_s = 0;
  // Latencies of the calls that completed inside the window.
  Samples latencies_us;
  // The first error a caller saw (the run stops counting for that caller).
  Status error;
};

// Runs `callers` threads that each call `call(caller_index)` in a loop, all
// released together. Counts the calls that complete between `warmup_s` and
// `warmup_s + window_s` after the release, then stops every caller and joins
// them (each finishes its current call; the calls bound their own waits).
CallerRun RunCallers(int callers, double warmup_s, double window_s,
                     const std::function<Status(int caller)>& call);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_BENCH_UTIL_H_
