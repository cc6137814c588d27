#include "benchmarks/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

namespace spool::bench {
namespace {

// ---- The table's model ----

struct Key {
  std::string group;
  std::string variant;
  std::string metric;
};

int GroupIndex(const std::string& group) {
  const auto& all = AllScenarios();
  auto it = std::find(all.begin(), all.end(), group);
  return it == all.end() ? static_cast<int>(all.size())
                         : static_cast<int>(it - all.begin());
}

// The value of one figure, if the run has it.
std::optional<double> Lookup(const RunReport& report, const std::string& group,
                             const std::string& system,
                             const std::string& variant,
                             const std::string& metric) {
  for (const Row& row : report.rows) {
    if (row.group == group && row.system == system && row.variant == variant &&
        row.metric == metric) {
      return row.value;
    }
  }
  return std::nullopt;
}

// Every (group, variant, metric) of the run, in scenario order, then in the
// order the workers reported them.
std::vector<Key> Keys(const RunReport& report) {
  std::vector<std::pair<int, Key>> keys;
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const Row& row : report.rows) {
    if (!seen.insert({row.group, row.variant, row.metric}).second) continue;
    keys.push_back(
        {GroupIndex(row.group), {row.group, row.variant, row.metric}});
  }
  std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });
  std::vector<Key> out;
  for (auto& k : keys) out.push_back(std::move(k.second));
  return out;
}

std::string UnitOf(const RunReport& report, const Key& key) {
  for (const Row& row : report.rows) {
    if (row.group == key.group && row.variant == key.variant &&
        row.metric == key.metric) {
      return row.unit;
    }
  }
  return "";
}

// The systems with at least one row: spool, the queue peers, the limits.
std::vector<std::string> Systems(const RunReport& report) {
  std::set<std::string> present;
  for (const Row& row : report.rows) present.insert(row.system);
  std::vector<std::string> out;
  if (present.count("spool")) out.push_back("spool");
  for (const std::string& p : AllPeers()) {
    if (!IsLimitPeer(p) && present.count(p)) out.push_back(p);
  }
  for (const std::string& p : AllPeers()) {
    if (IsLimitPeer(p) && present.count(p)) out.push_back(p);
  }
  return out;
}

// spool beside the best queue peer and the limits, for one figure.
struct Comparison {
  std::optional<double> spool;
  std::string best_peer;
  std::optional<double> best;
  std::optional<double> fsync;
  std::optional<double> rocksdb_raw;
};

Comparison Compare(const RunReport& report, const Key& key) {
  Comparison c;
  c.spool = Lookup(report, key.group, "spool", key.variant, key.metric);
  bool lower = LowerIsBetter(key.metric);
  for (const std::string& p : AllPeers()) {
    std::optional<double> v =
        Lookup(report, key.group, p, key.variant, key.metric);
    if (!v) continue;
    if (p == "fsync") {
      c.fsync = v;
    } else if (p == "rocksdb_raw") {
      c.rocksdb_raw = v;
    } else if (!c.best || (lower ? *v < *c.best : *v > *c.best)) {
      c.best = v;
      c.best_peer = p;
    }
  }
  return c;
}

std::string FormatRatio(double r) {
  if (!std::isfinite(r)) return "n/a";
  char buf[32];
  if (r >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f×", r);
  } else if (r >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f×", r);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f×", r);
  }
  return buf;
}

std::string Ratio(const std::optional<double>& a,
                  const std::optional<double>& b) {
  if (!a || !b || *b == 0) return "";
  return FormatRatio(*a / *b);
}

std::string MetricLabel(const std::string& metric) {
  return metric + (LowerIsBetter(metric) ? " ↓" : " ↑");
}

// A table as cells; the first row is the header.
using Grid = std::vector<std::vector<std::string>>;

Grid BuildGrid(const RunReport& report) {
  std::vector<std::string> systems = Systems(report);
  Grid grid;
  std::vector<std::string> header = {"scenario", "variant", "metric"};
  for (const std::string& s : systems) header.push_back(s);
  header.push_back("spool ÷ best peer");
  header.push_back("spool ÷ fsync");
  header.push_back("spool ÷ rocksdb_raw");
  grid.push_back(header);
  for (const Key& key : Keys(report)) {
    std::vector<std::string> line = {key.group, key.variant,
                                     MetricLabel(key.metric)};
    for (const std::string& s : systems) {
      std::optional<double> v =
          Lookup(report, key.group, s, key.variant, key.metric);
      line.push_back(v ? FormatValue(*v) : "");
    }
    Comparison c = Compare(report, key);
    std::string best = Ratio(c.spool, c.best);
    if (!best.empty()) best += " (" + c.best_peer + ")";
    line.push_back(best);
    line.push_back(Ratio(c.spool, c.fsync));
    line.push_back(Ratio(c.spool, c.rocksdb_raw));
    grid.push_back(line);
  }
  return grid;
}

// Display columns of a UTF-8 string: code points, not bytes.
size_t DisplayWidth(const std::string& s) {
  size_t width = 0;
  for (unsigned char c : s) width += (c & 0xC0) != 0x80;
  return width;
}

std::string Pad(const std::string& s, size_t width, bool right) {
  size_t w = DisplayWidth(s);
  std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

std::string LoadText(const std::array<double, 3>& load) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return buf;
}

std::string RunSummary(const RunReport& r) {
  std::string out = std::string(r.plan.quick ? "quick" : "full") + " run, " +
                    std::to_string(r.plan.rounds) +
                    " rounds per scenario (median round; latency "
                    "percentiles over all calls of all rounds)";
  return out;
}

std::string VersionsText(const RunReport& r) {
  std::string out;
  for (const auto& [name, version] : r.machine.versions) {
    out += (out.empty() ? "" : ", ") + name + " " + version;
  }
  return out;
}

std::vector<std::string> MethodNotes(const RunReport& r) {
  const Plan& p = r.plan;
  std::vector<std::string> notes = {
      "Ratios are spool ÷ other; ↑ marks metrics where higher is better, "
      "↓ where lower is better. \"best peer\" is the best of the queue peers "
      "(not the limits) for that figure; both Redis variants (redis, "
      "redis_plain) count as queue peers.",
      "enqueue: per round, " + WithCommas(p.warmup_calls) +
          " unmeasured warm-up calls, then " +
          WithCommas(p.sequential_enqueues) +
          " sequential awaited enqueues (callers=1 latencies), then 1, 8 and "
          "64 callers each enqueueing and awaiting in a loop; throughput "
          "counts "
          "the calls completed in a " +
          FormatValue(p.caller_window_s) + " s window after a " +
          FormatValue(p.caller_warmup_s) +
          " s warm-up. spool is not started during enqueue (nothing runs), as "
          "the peers' enqueue only stores. 100-byte payloads.",
      "drain: " + WithCommas(p.drain_tasks) +
          " tasks stored before the clock starts; timed from start until every "
          "task is claimed durably, run by a no-op handler and its completion "
          "durable (spool: Start until Drain resolves; peers: N clients "
          "looping claim+complete until empty). Concurrency N is "
          "runtime.workers, for spool and peers alike.",
      "recovery: the crash state (1,000 running, the rest pending) is written "
      "straight through the store and flushed; ms runs from Runtime::Open "
      "until the first task runs again (recovery itself happens inside "
      "Open); open_ms and start_ms are the Open and Open+Start calls.",
      "long_history: the history is written through the same transitions the "
      "writer applies (pending, running, succeeded; one commit per step per "
      "10,000 tasks). next_task_us times actors::ReadyQueue::PopNext, the "
      "scheduler's in-memory next-task selection (no storage access), "
      "loaded from the store as Open loads it, in batches of " +
          std::to_string(p.selection_batch) +
          "; run_ms runs from Start until Drain resolves. The memory,delayed "
          "variant times the same selection with " +
          WithCommas(p.delayed_tasks) +
          " tasks due in an hour over 10,000 groups, among 10,000 ready "
          "tasks, one per group (issue 3).",
      "caller_thread: CPU time of the calling thread "
      "(CLOCK_THREAD_CPUTIME_ID) around each call; \"enqueue\" is the "
      "Enqueue call alone, \"+wait\" adds waiting on its future. A peer's "
      "enqueue blocks until durable, so it has only \"+wait\". "
      "clock_gettime is the cost of reading the clock itself.",
      "statistics: per round, enqueue (8 callers, sync, the enqueue "
      "scenario's window) and a drain of " +
          WithCommas(std::max(p.drain_tasks * 4, 8000)) +
          " stored tasks (runtime.workers, sync), three ways in rotating "
          "order: statistics=off (not kept: TestHooks::collect_statistics), "
          "kept (kept, read by nobody: the default), polled (kept, and a "
          "thread calls Runtime::GetStatistics and FormatPrometheus every "
          "10 ms). rate_over_off and cpu_over_off are a median over off's "
          "(1 = no cost); process_cpu_us_per_task is the whole process's CPU "
          "time (getrusage: callers, actors, workers, the poller) per task "
          "enqueued or drained, which moves less with the machine's load "
          "than the rates.",
      "retention: per round, a history of " + WithCommas(p.history_done) +
          " succeeded tasks written through the store, then " +
          WithCommas(std::max(p.drain_tasks * 4, 8000)) +
          " tasks stored and drained (runtime.workers, sync) while a thread "
          "calls GetTask on random ones of them, one call after another, "
          "three ways in rotating order: off (retention.succeeded = "
          "forever), scan (24h over a history that finished just now: each "
          "pass reads every succeeded task's state and deletes none), prune "
          "(24h over a history two days old: retention deletes it while the "
          "drain runs). *_over_off are medians over off's; "
          "deleted_by_drain_end is what retention had deleted when Drain "
          "resolved.",
      "backup: a store of " + WithCommas(p.quick ? 100'000 : 1'000'000) +
          " succeeded tasks written through the store, then 64 callers "
          "enqueue (sync) all along; each round runs Runtime::BackupTo into a "
          "fresh directory (a full backup) and compares the enqueues "
          "completed while it ran with those completed in the second before "
          "it. during_over_before is the median of the rounds' ratios.",
      "codec: Google Benchmark, " + std::to_string(p.rounds) +
          " repetitions of at least " + FormatValue(p.codec_min_time_s) +
          " s each after a warm-up; the median repetition.",
      "Every system runs in its own child process, one after another; a peer "
      "that cannot run is skipped with a note. The page cache is warm: "
      "set-up data is written just before it is measured.",
  };
  return notes;
}

}  // namespace

bool LowerIsBetter(const std::string& metric) {
  return metric == "ms" || metric == "bytes" || metric == "reruns" ||
         metric == "emissions" || EndsWith(metric, "_us") ||
         EndsWith(metric, "_ms") || metric.find("_us_") != std::string::npos ||
         metric.find("_ms_") != std::string::npos;
}

// ---- Goals ----

std::vector<GoalResult> EvaluateGoals(const RunReport& report) {
  std::vector<GoalResult> goals;
  auto get = [&](const std::string& group, const std::string& system,
                 const std::string& variant, const std::string& metric) {
    return Lookup(report, group, system, variant, metric);
  };
  auto missing = [](GoalResult g, const std::string& why) {
    g.verdict = "not measured: " + why;
    return g;
  };
  // spool ÷ other >= target (at_least) or <= target.
  auto ratio_goal = [&](const std::string& issue, const std::string& text,
                        const std::string& group, const std::string& variant,
                        const std::string& metric, const std::string& other,
                        double target, bool at_least) {
    GoalResult g;
    g.issue = issue;
    g.goal = text;
    g.scenario = group;
    g.target = std::string(at_least ? "≥ " : "≤ ") + FormatRatio(target);
    std::optional<double> s = get(group, "spool", variant, metric);
    std::optional<double> o = get(group, other, variant, metric);
    if (!s) return missing(g, "no spool figure for " + group + " " + variant);
    if (!o || *o == 0) {
      return missing(g, "no " + other + " figure for " + group + " " + variant);
    }
    double r = *s / *o;
    g.measured = FormatRatio(r) + " (spool " + FormatValue(*s) + " ÷ " + other +
                 " " + FormatValue(*o) + " " +
                 UnitOf(report, {group, variant, metric}) + ")";
    g.met = at_least ? r >= target : r <= target;
    if (*g.met) {
      g.verdict = "met";
    } else if (at_least) {
      g.verdict = "missed: " + FormatValue(100 * r / target) + "% of the goal";
    } else {
      g.verdict = "missed: " + FormatRatio(r / target) + " the allowed ratio";
    }
    return g;
  };
  auto value_goal = [&](const std::string& issue, const std::string& text,
                        const std::string& group, const std::string& variant,
                        const std::string& metric, double target,
                        const std::string& unit, bool at_least) {
    GoalResult g;
    g.issue = issue;
    g.goal = text;
    g.scenario = group;
    g.target =
        std::string(at_least ? "≥ " : "≤ ") + FormatValue(target) + " " + unit;
    std::optional<double> s = get(group, "spool", variant, metric);
    if (!s) return missing(g, "no spool figure for " + group + " " + variant);
    g.measured = FormatValue(*s) + " " + unit;
    g.met = at_least ? *s >= target : *s <= target;
    if (*g.met) {
      g.verdict = "met";
    } else if (at_least) {
      g.verdict = "missed: " + FormatValue(100 * *s / target) + "% of the goal";
    } else {
      g.verdict = "missed: " + FormatRatio(*s / target) + " the limit";
    }
    return g;
  };

  // The drain variants present: at concurrency N, and the large drain.
  std::string drain_n, drain_big;
  for (const Row& row : report.rows) {
    if (row.group != "drain" || row.system != "spool") continue;
    if (row.variant.find(",tasks=") != std::string::npos) {
      drain_big = row.variant;
    } else if (row.variant != "sync,concurrency=1") {
      drain_n = row.variant;
    }
  }
  std::string history;
  for (const Row& row : report.rows) {
    if (row.group == "long_history" && row.system == "spool" &&
        row.variant.rfind("sync,", 0) == 0) {
      history = row.variant;
    }
  }
  std::string recovery;
  for (const Row& row : report.rows) {
    if (row.group == "recovery" && row.system == "spool") {
      recovery = row.variant;
    }
  }

  goals.push_back(ratio_goal("6", "Durable enqueue, 64 callers: ≥ 20× SQLite",
                             "enqueue", "sync,callers=64", "ops_per_s",
                             "sqlite", 20, true));
  // Issue 6's "3× Redis" against each way Redis is used: Lua scripts with a
  // task hash, and plain list commands (the faster).
  for (const char* peer : {"redis", "redis_plain", "beanstalkd", "postgres"}) {
    goals.push_back(ratio_goal(
        "6", std::string("Durable enqueue, 64 callers: ≥ 3× ") + peer,
        "enqueue", "sync,callers=64", "ops_per_s", peer, 3, true));
  }
  goals.push_back(ratio_goal("6", "Drain, concurrency 1: ≥ 20× SQLite", "drain",
                             "sync,concurrency=1", "tasks_per_s", "sqlite", 20,
                             true));
  if (!drain_n.empty()) {
    goals.push_back(
        ratio_goal("6", "Drain, " + drain_n.substr(5) + ": ≥ 20× SQLite",
                   "drain", drain_n, "tasks_per_s", "sqlite", 20, true));
  }
  goals.push_back(value_goal(
      "6", "Recovery of 1,000 interrupted tasks: ≤ 20 ms", "recovery",
      recovery.empty() ? "sync,tasks=10000,running=1000" : recovery, "ms", 20,
      "ms", false));
  goals.push_back(value_goal(
      "6", "Long history, next-task selection: ≤ 5 µs", "long_history",
      history.empty() ? "sync,done=100000,pending=1000" : history,
      "next_task_us", 5, "us", false));
  std::string delayed;
  for (const Row& row : report.rows) {
    if (row.group == "long_history" && row.system == "spool" &&
        row.variant.rfind("memory,delayed=", 0) == 0) {
      delayed = row.variant;
    }
  }
  goals.push_back(value_goal(
      "3",
      "Next-task selection among 100,000 delayed tasks, 10,000 groups: "
      "≤ 5 µs",
      "long_history",
      delayed.empty() ? "memory,delayed=100000,groups=10000" : delayed,
      "next_task_us", 5, "us", false));
  goals.push_back(ratio_goal("2, 6",
                             "Single-caller durable enqueue p50: ≤ 1.5× one "
                             "fdatasync",
                             "enqueue", "sync,callers=1", "p50_us", "fsync",
                             1.5, false));
  goals.push_back(value_goal("2",
                             "64 callers: ≥ 50,000 durable enqueues/s on 2 "
                             "cores",
                             "enqueue", "sync,callers=64", "ops_per_s", 50000,
                             "ops/s", true));
  goals.push_back(value_goal("2", "Caller-thread CPU per enqueue, p50: ≤ 5 µs",
                             "caller_thread", "sync,enqueue", "p50_us", 5, "us",
                             false));
  goals.push_back(value_goal(
      "2", "Drain of 100,000 no-op tasks: ≥ 30,000 tasks/s", "drain",
      drain_big.empty() ? "sync,concurrency=4,tasks=100000" : drain_big,
      "tasks_per_s", 30000, "tasks/s", true));

  // The read side's goals (issue 4): the best point-get rate over the
  // caller counts, and the unfiltered 1,000-task JSON listing.
  std::string best_get;
  double best_rate = -1;
  for (const Row& row : report.rows) {
    if (row.group == "reads" && row.system == "spool" &&
        row.metric == "gets_per_s" && row.variant.rfind("point_get,", 0) == 0 &&
        row.value > best_rate) {
      best_rate = row.value;
      best_get = row.variant;
    }
  }
  goals.push_back(value_goal("4",
                             "Point gets across the reader pool: ≥ 200,000/s",
                             "reads", best_get.empty() ? "point_get" : best_get,
                             "gets_per_s", 200000, "/s", true));
  goals.push_back(value_goal("4", "Listing 1,000 tasks as JSON, p50: ≤ 1 ms",
                             "reads", "list_1000,json,no_filter",
                             "latency_p50_ms", 1, "ms", false));

  // The lean run path (issue 10), against the best peer that ran.
  auto best_of = [&](const std::vector<std::string>& peers,
                     const std::string& group, const std::string& variant,
                     const std::string& metric) {
    std::string best;
    std::optional<double> best_value;
    for (const std::string& peer : peers) {
      std::optional<double> v = get(group, peer, variant, metric);
      if (v && (!best_value || (LowerIsBetter(metric) ? *v < *best_value
                                                      : *v > *best_value))) {
        best_value = v;
        best = peer;
      }
    }
    return best;
  };
  const std::vector<std::string> queue_peers = {
      "sqlite", "redis", "redis_plain", "beanstalkd", "postgres"};
  // spool's figure in (group, variant) ÷ the best peer's in peer_variant.
  auto best_peer_goal = [&](const std::string& text, const std::string& group,
                            const std::string& variant,
                            const std::string& peer_variant,
                            const std::vector<std::string>& peers,
                            double target) {
    GoalResult g;
    g.issue = "10";
    g.goal = text;
    g.scenario = group;
    g.target = "≥ " + FormatRatio(target);
    std::string metric = group == "enqueue" ? "ops_per_s" : "tasks_per_s";
    std::string peer = best_of(peers, group, peer_variant, metric);
    std::optional<double> s = get(group, "spool", variant, metric);
    std::optional<double> o =
        peer.empty() ? std::nullopt : get(group, peer, peer_variant, metric);
    if (!s) return missing(g, "no spool figure for " + group + " " + variant);
    if (!o || *o == 0) return missing(g, "no peer figure for " + peer_variant);
    double r = *s / *o;
    g.measured = FormatRatio(r) + " (spool " + FormatValue(*s) + " ÷ " + peer +
                 " " + FormatValue(*o) + ")";
    g.met = r >= target;
    g.verdict =
        *g.met ? "met"
               : "missed: " + FormatValue(100 * r / target) + "% of the goal";
    return g;
  };
  goals.push_back(value_goal(
      "10", "Drain of 100,000 no-op tasks at 4 workers: ≥ 50,000 tasks/s",
      "drain",
      drain_big.empty() ? "sync,concurrency=4,tasks=100000" : drain_big,
      "tasks_per_s", 50000, "tasks/s", true));
  goals.push_back(best_peer_goal(
      "Drain of 100,000 at 4 workers: ≥ 8× the best peer's drain at 4", "drain",
      drain_big.empty() ? "sync,concurrency=4,tasks=100000" : drain_big,
      drain_n.empty() ? "sync,concurrency=4" : drain_n, queue_peers, 8));
  goals.push_back(value_goal("10", "Drain at concurrency 1: ≥ 20,000 tasks/s",
                             "drain", "sync,concurrency=1", "tasks_per_s",
                             20000, "tasks/s", true));
  goals.push_back(ratio_goal("10", "Drain at concurrency 1: ≥ 4× beanstalkd",
                             "drain", "sync,concurrency=1", "tasks_per_s",
                             "beanstalkd", 4, true));
  goals.push_back(value_goal("10", "Enqueue, 64 callers: ≥ 100,000/s",
                             "enqueue", "sync,callers=64", "ops_per_s", 100000,
                             "ops/s", true));
  goals.push_back(best_peer_goal(
      "Enqueue, 64 callers: ≥ 2× the best Redis variant", "enqueue",
      "sync,callers=64", "sync,callers=64", {"redis", "redis_plain"}, 2));
  goals.push_back(value_goal(
      "10", "Writer CPU per enqueued task (64 callers): ≤ 5 µs", "enqueue",
      "sync,callers=64", "writer_cpu_us_per_task", 5, "us", false));
  goals.push_back(value_goal(
      "10", "Writer CPU per claim plus outcome (drain of 100,000): ≤ 8 µs",
      "drain",
      drain_big.empty() ? "sync,concurrency=4,tasks=100000" : drain_big,
      "writer_cpu_us_per_task", 8, "us", false));
  goals.push_back(ratio_goal("10", "Enqueue, 1 caller, p50: ≤ 1.3× rocksdb_raw",
                             "enqueue", "sync,callers=1", "p50_us",
                             "rocksdb_raw", 1.3, false));
  goals.push_back(value_goal("10", "Caller-thread CPU per enqueue, p50: ≤ 3 µs",
                             "caller_thread", "sync,enqueue", "p50_us", 3, "us",
                             false));
  goals.push_back(value_goal(
      "10", "Recovery of 1,000 interrupted tasks among 10,000: ≤ 20 ms",
      "recovery", recovery.empty() ? "sync,tasks=10000,running=1000" : recovery,
      "ms", 20, "ms", false));
  goals.push_back(
      value_goal("10", "Opening 101,000 tasks: ≤ 20 ms", "long_history",
                 history.empty() ? "sync,done=100000,pending=1000" : history,
                 "open_ms", 20, "ms", false));

  // Only the goals of the scenarios this run measured.
  std::vector<GoalResult> selected;
  for (GoalResult& g : goals) {
    if (std::find(report.scenarios.begin(), report.scenarios.end(),
                  g.scenario) != report.scenarios.end()) {
      selected.push_back(std::move(g));
    }
  }
  return selected;
}

// ---- Text ----

std::string FormatTable(const RunReport& report) {
  std::ostringstream out;
  out << "spool-bench: " << RunSummary(report) << "\n";
  out << "started " << report.started_at << ", took "
      << FormatValue(report.duration_s) << " s; load average "
      << LoadText(report.machine.load_start) << " at start, "
      << LoadText(report.machine.load_end) << " at end\n";
  out << "machine: " << MachineSummary(report.machine) << "\n";
  out << "versions: " << VersionsText(report) << "\n";
  out << "spool config: " << report.spool_config << "\n\n";

  Grid grid = BuildGrid(report);
  std::vector<size_t> widths(grid[0].size(), 0);
  for (const auto& line : grid) {
    for (size_t i = 0; i < line.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(line[i]));
    }
  }
  for (size_t r = 0; r < grid.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < grid[r].size(); ++i) {
      if (i > 0) line += "  ";
      line += Pad(grid[r][i], widths[i], i >= 3);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t w : widths) total += w + 2;
      out << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
    }
  }

  out << "\ngoals (issues 2, 3, 4, 6 and 10):\n";
  for (const GoalResult& g : EvaluateGoals(report)) {
    out << "  [" << (g.met ? (*g.met ? "met   " : "MISSED") : "  --  ") << "] "
        << g.goal << ": " << (g.measured.empty() ? "-" : g.measured)
        << "; goal " << g.target << "; " << g.verdict << " (issue " << g.issue
        << ")\n";
  }
  if (!report.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : report.notes) out << "  - " << n << "\n";
  }
  out << "\nsystems:\n";
  for (const auto& [name, text] : report.systems) {
    out << "  " << name << ": " << text << "\n";
  }
  out << "\nmethod:\n";
  for (const std::string& n : MethodNotes(report)) out << "  - " << n << "\n";
  return out.str();
}

// ---- Markdown ----

namespace {

std::string MdEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace

std::string FormatMarkdown(const RunReport& report,
                           const std::string& chart_path) {
  std::ostringstream out;
  out << "### Run\n\n";
  out << "- " << RunSummary(report) << ".\n";
  out << "- Command: `" << report.command << "`\n";
  out << "- Started " << report.started_at << ", took "
      << FormatValue(report.duration_s) << " s. Load average (1, 5, 15 min) "
      << LoadText(report.machine.load_start) << " at start, "
      << LoadText(report.machine.load_end) << " at end.\n";
  out << "- Machine: " << MdEscape(MachineSummary(report.machine)) << ".\n";
  out << "- Versions: " << VersionsText(report) << ".\n";
  out << "- spool config: " << MdEscape(report.spool_config) << ".\n\n";

  out << "### Results\n\n";
  Grid grid = BuildGrid(report);
  for (size_t r = 0; r < grid.size(); ++r) {
    out << "|";
    for (const std::string& cell : grid[r])
      out << " " << MdEscape(cell) << " |";
    out << "\n";
    if (r == 0) {
      out << "|";
      for (size_t i = 0; i < grid[r].size(); ++i) {
        out << (i < 3 ? "---|" : "---:|");
      }
      out << "\n";
    }
  }
  out << "\n### Goals\n\n";
  out << "| issue | goal | measured | target | verdict |\n";
  out << "|---|---|---|---|---|\n";
  for (const GoalResult& g : EvaluateGoals(report)) {
    std::string verdict =
        g.met ? (*g.met ? "**met**" : "**missed** — " + g.verdict.substr(8))
              : g.verdict;
    out << "| " << g.issue << " | " << MdEscape(g.goal) << " | "
        << MdEscape(g.measured.empty() ? "—" : g.measured) << " | "
        << MdEscape(g.target) << " | " << MdEscape(verdict) << " |\n";
  }
  if (!chart_path.empty()) {
    out << "\n![spool beside its peers](" << chart_path << ")\n";
  }
  if (!report.notes.empty()) {
    out << "\n### Notes from the run\n\n";
    for (const std::string& n : report.notes)
      out << "- " << MdEscape(n) << "\n";
  }
  out << "\n### Systems\n\n";
  for (const auto& [name, text] : report.systems) {
    out << "- **" << name << "**: " << MdEscape(text) << "\n";
  }
  out << "\n### Method\n\n";
  for (const std::string& n : MethodNotes(report)) out << "- " << n << "\n";
  return out.str();
}

// ---- JSON ----

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

std::string JsonLoad(const std::array<double, 3>& load) {
  return "[" + JsonNumber(load[0]) + ", " + JsonNumber(load[1]) + ", " +
         JsonNumber(load[2]) + "]";
}

}  // namespace

std::string FormatJson(const RunReport& report) {
  const MachineInfo& m = report.machine;
  std::ostringstream out;
  out << "{\n  \"machine\": {\n";
  out << "    \"cores\": " << m.cores << ",\n";
  out << "    \"cpu\": " << JsonString(m.cpu_model) << ",\n";
  out << "    \"memory_bytes\": " << m.memory_bytes << ",\n";
  out << "    \"disk\": {\"device\": " << JsonString(m.disk_device)
      << ", \"filesystem\": " << JsonString(m.disk_filesystem)
      << ", \"mount\": " << JsonString(m.disk_mount)
      << ", \"model\": " << JsonString(m.disk_model)
      << ", \"rotational\": " << JsonString(m.disk_rotational)
      << ", \"write_cache\": " << JsonString(m.disk_write_cache)
      << ", \"bytes\": " << m.disk_bytes
      << ", \"scratch_dir\": " << JsonString(m.scratch_dir) << "},\n";
  out << "    \"kernel\": " << JsonString(m.kernel) << ",\n";
  out << "    \"load_start\": " << JsonLoad(m.load_start) << ",\n";
  out << "    \"load_end\": " << JsonLoad(m.load_end) << ",\n";
  out << "    \"versions\": {";
  bool first = true;
  for (const auto& [name, version] : m.versions) {
    out << (first ? "" : ", ") << JsonString(name) << ": "
        << JsonString(version);
    first = false;
  }
  out << "}\n  },\n";

  out << "  \"run\": {\n";
  out << "    \"quick\": " << (report.plan.quick ? "true" : "false") << ",\n";
  out << "    \"rounds\": " << report.plan.rounds << ",\n";
  out << "    \"command\": " << JsonString(report.command) << ",\n";
  out << "    \"started_at\": " << JsonString(report.started_at) << ",\n";
  out << "    \"duration_s\": " << JsonNumber(report.duration_s) << ",\n";
  out << "    \"scenarios\": [";
  for (size_t i = 0; i < report.scenarios.size(); ++i) {
    out << (i ? ", " : "") << JsonString(report.scenarios[i]);
  }
  out << "],\n    \"peers\": [";
  for (size_t i = 0; i < report.peers.size(); ++i) {
    out << (i ? ", " : "") << JsonString(report.peers[i]);
  }
  out << "],\n    \"spool_config\": " << JsonString(report.spool_config)
      << "\n  },\n";

  out << "  \"systems\": {";
  first = true;
  for (const auto& [name, text] : report.systems) {
    out << (first ? "\n" : ",\n") << "    " << JsonString(name) << ": "
        << JsonString(text);
    first = false;
  }
  out << "\n  },\n";

  out << "  \"results\": [";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const Row& r = report.rows[i];
    out << (i ? ",\n" : "\n") << "    {\"scenario\": " << JsonString(r.scenario)
        << ", \"system\": " << JsonString(r.system)
        << ", \"variant\": " << JsonString(r.variant)
        << ", \"metric\": " << JsonString(r.metric)
        << ", \"value\": " << JsonNumber(r.value)
        << ", \"unit\": " << JsonString(r.unit) << "}";
  }
  out << "\n  ],\n";

  out << "  \"goals\": [";
  std::vector<GoalResult> goals = EvaluateGoals(report);
  for (size_t i = 0; i < goals.size(); ++i) {
    const GoalResult& g = goals[i];
    out << (i ? ",\n" : "\n") << "    {\"issue\": " << JsonString(g.issue)
        << ", \"goal\": " << JsonString(g.goal)
        << ", \"measured\": " << JsonString(g.measured)
        << ", \"target\": " << JsonString(g.target)
        << ", \"met\": " << (g.met ? (*g.met ? "true" : "false") : "null")
        << ", \"verdict\": " << JsonString(g.verdict) << "}";
  }
  out << "\n  ],\n";

  out << "  \"notes\": [";
  for (size_t i = 0; i < report.notes.size(); ++i) {
    out << (i ? ",\n" : "\n") << "    " << JsonString(report.notes[i]);
  }
  out << (report.notes.empty() ? "" : "\n  ") << "]\n}\n";
  return out.str();
}

// ---- SVG ----

namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Axis labels: "0", "0.5", "10", "2.5k", "1M".
std::string TickLabel(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%gM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%gk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%g", v);
  }
  return buf;
}

struct Bar {
  std::string label;
  double value;
  std::string fill;
};

struct Panel {
  std::string title;
  std::vector<Bar> bars;
};

}  // namespace

std::string RenderSvg(const RunReport& report) {
  // The figures worth a picture: where spool stands among its peers.
  struct Spec {
    std::string group, variant, metric, title;
  };
  std::string drain_n;
  for (const Row& row : report.rows) {
    if (row.group == "drain" && row.variant != "sync,concurrency=1" &&
        row.variant.find(",tasks=") == std::string::npos) {
      drain_n = row.variant;
    }
  }
  std::vector<Spec> specs = {
      {"enqueue", "sync,callers=1", "p50_us",
       "Durable enqueue, 1 caller: p50 latency (µs, lower is better)"},
      {"enqueue", "sync,callers=8", "ops_per_s",
       "Durable enqueue, 8 callers (ops/s, higher is better)"},
      {"enqueue", "sync,callers=64", "ops_per_s",
       "Durable enqueue, 64 callers (ops/s, higher is better)"},
      {"drain", "sync,concurrency=1", "tasks_per_s",
       "Drain, concurrency 1 (tasks/s, higher is better)"},
      {"caller_thread", "sync,enqueue+wait", "p50_us",
       "CPU on the caller's thread per durable enqueue, p50 (µs, lower is "
       "better)"},
  };
  if (!drain_n.empty()) {
    specs.insert(specs.begin() + 4, {"drain", drain_n, "tasks_per_s",
                                     "Drain, " + drain_n.substr(5) +
                                         " (tasks/s, higher is better)"});
  }

  std::vector<Panel> panels;
  for (const Spec& spec : specs) {
    Panel panel;
    panel.title = spec.title;
    for (const std::string& system : Systems(report)) {
      std::optional<double> v =
          Lookup(report, spec.group, system, spec.variant, spec.metric);
      if (!v || *v <= 0) continue;
      std::string fill = system == "spool"     ? "#2b6cb0"
                         : IsLimitPeer(system) ? "#d9d9d9"
                                               : "#8c8c8c";
      std::string label = IsLimitPeer(system) ? system + " (limit)" : system;
      panel.bars.push_back({label, *v, fill});
      if (system == "spool" && spec.group == "caller_thread") {
        std::optional<double> call =
            Lookup(report, spec.group, system, "sync,enqueue", spec.metric);
        if (call && *call > 0) {
          panel.bars.push_back({"spool (call only)", *call, "#63b3ed"});
        }
      }
    }
    if (!panel.bars.empty()) panels.push_back(std::move(panel));
  }

  const double width = 880, label_w = 150, plot_w = 560, bar_h = 16,
               bar_gap = 6, title_h = 26, axis_h = 22, panel_gap = 18, top = 44;
  double height = top;
  for (const Panel& p : panels) {
    height += title_h + p.bars.size() * (bar_h + bar_gap) + axis_h + panel_gap;
  }
  height += 24;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(width)
      << "\" height=\"" << Num(height) << "\" viewBox=\"0 0 " << Num(width)
      << " " << Num(height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"12\" y=\"22\" font-size=\"16\" font-weight=\"bold\">"
      << XmlEscape("spool-bench: spool beside its peers (" +
                   std::string(report.plan.quick ? "quick" : "full") +
                   " run, median of " + std::to_string(report.plan.rounds) +
                   " rounds)")
      << "</text>\n";
  svg << "<text x=\"12\" y=\"38\" fill=\"#555\">"
      << XmlEscape(MachineSummary(report.machine)) << "</text>\n";

  double y = top;
  for (const Panel& p : panels) {
    double lo = p.bars[0].value, hi = p.bars[0].value;
    for (const Bar& b : p.bars) {
      lo = std::min(lo, b.value);
      hi = std::max(hi, b.value);
    }
    bool log_scale = hi / lo > 20;
    double axis_lo = 0, axis_hi;
    std::vector<double> ticks;
    if (log_scale) {
      axis_lo = std::pow(10, std::floor(std::log10(lo)));
      if (axis_lo >= lo) axis_lo /= 10;
      axis_hi = std::pow(10, std::ceil(std::log10(hi)));
      for (double t = axis_lo; t <= axis_hi * 1.0001; t *= 10)
        ticks.push_back(t);
    } else {
      double step = std::pow(10, std::floor(std::log10(hi)));
      if (hi / step < 2)
        step /= 5;
      else if (hi / step < 5)
        step /= 2;
      axis_hi = std::ceil(hi / step) * step;
      for (double t = 0; t <= axis_hi * 1.0001; t += step) ticks.push_back(t);
    }
    auto scale = [&](double v) {
      if (log_scale) {
        return plot_w * (std::log10(v) - std::log10(axis_lo)) /
               (std::log10(axis_hi) - std::log10(axis_lo));
      }
      return plot_w * v / axis_hi;
    };
    svg << "<text x=\"12\" y=\"" << Num(y + 16) << "\" font-weight=\"bold\">"
        << XmlEscape(p.title) << (log_scale ? " — log scale" : "")
        << "</text>\n";
    double bars_top = y + title_h;
    double bars_bottom = bars_top + p.bars.size() * (bar_h + bar_gap);
    for (double t : ticks) {
      double x = label_w + scale(t);
      svg << "<line x1=\"" << Num(x) << "\" y1=\"" << Num(bars_top - 2)
          << "\" x2=\"" << Num(x) << "\" y2=\"" << Num(bars_bottom)
          << "\" stroke=\"#e2e2e2\"/>\n";
      svg << "<text x=\"" << Num(x) << "\" y=\"" << Num(bars_bottom + 14)
          << "\" text-anchor=\"middle\" fill=\"#555\" font-size=\"10\">"
          << XmlEscape(TickLabel(t)) << "</text>\n";
    }
    double by = bars_top;
    for (const Bar& b : p.bars) {
      double w = std::max(1.0, scale(b.value));
      svg << "<text x=\"" << Num(label_w - 8) << "\" y=\"" << Num(by + 12)
          << "\" text-anchor=\"end\">" << XmlEscape(b.label) << "</text>\n";
      svg << "<rect x=\"" << Num(label_w) << "\" y=\"" << Num(by)
          << "\" width=\"" << Num(w) << "\" height=\"" << Num(bar_h)
          << "\" fill=\"" << b.fill << "\"/>\n";
      svg << "<text x=\"" << Num(label_w + w + 6) << "\" y=\"" << Num(by + 12)
          << "\">" << XmlEscape(FormatValue(b.value)) << "</text>\n";
      by += bar_h + bar_gap;
    }
    y = bars_bottom + axis_h + panel_gap;
  }
  svg << "<text x=\"12\" y=\"" << Num(height - 10)
      << "\" fill=\"#555\" font-size=\"10\">"
      << XmlEscape(
             "spool in blue; queue peers in grey; limits (fsync: the "
             "disk, rocksdb_raw: the storage engine) in light grey. "
             "Equal durability: every write is fsynced before it is "
             "acknowledged.")
      << "</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace spool::bench
