// spool-bench: what spool costs on this machine, beside the systems a user
// would otherwise use, in one run.
//
//   spool-bench [--quick] [--scenario NAME]... [--peers LIST]
//               [--config FILE] [--set section.key=value]...
//               [--format table|json|markdown] [--out FILE] [--svg FILE]
//               [--json FILE]
//               [--rounds N] [--timeout SECONDS] [--wait-for-load LOAD]
//
// The parent process only orchestrates: each (system, scenario) pair runs in
// a child process (this executable with the hidden --worker flags), one
// after another, and hands its rows back over a pipe. See
// docs/benchmarks.md for what each scenario measures.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/config.h>
#include <spool/options.h>

#include "benchmarks/bench_util.h"
#include "benchmarks/machine.h"
#include "benchmarks/report.h"
#include "benchmarks/scenarios.h"
#include "benchmarks/worker_process.h"

namespace spool::bench {
namespace {

constexpr char kUsage[] =
    "usage: spool-bench [--quick] [--scenario NAME]... [--peers LIST]\n"
    "                   [--config FILE] [--set section.key=value]...\n"
    "                   [--format table|json|markdown] [--out FILE]\n"
    "                   [--svg FILE] [--json FILE] [--rounds N]\n"
    "                   [--timeout SECONDS] [--wait-for-load LOAD]\n"
    "\n"
    "  --quick            a short run: 3 rounds, smaller sizes (~1 minute)\n"
    "  --scenario NAME    enqueue, drain, recovery, long_history,\n"
    "                     caller_thread, reads, statistics, retention,\n"
    "                     backup, codec\n"
    "                     (repeatable;\n"
    "                     default: all)\n"
    "  --peers LIST       comma-separated: fsync, rocksdb_raw, sqlite, redis\n"
    "                     (Lua scripts), redis_plain (LPUSH/LMOVE/LREM),\n"
    "                     beanstalkd, postgres; 'all' (default) or 'none'\n"
    "  --config FILE      spool's config (spool::LoadOptions); default: the\n"
    "                     built-in defaults, which config/spool.toml lists\n"
    "  --set K=V          override one config key (repeatable)\n"
    "  --format F         table (default), json or markdown\n"
    "  --out FILE         write the report to FILE instead of stdout\n"
    "  --svg FILE         also write a bar chart of spool and its peers\n"
    "  --json FILE        also write the JSON report to FILE\n"
    "  --rounds N         rounds per scenario (default 5; --quick 3)\n"
    "  --timeout S        per system and scenario (default 1800; quick 300)\n"
    "  --wait-for-load L  first wait (up to 15 min) until the 1-minute load\n"
    "                     average is at most L\n"
    "  --print-config     print the spool options in effect and exit\n"
    "\n"
    "Progress goes to stderr; the report to stdout or --out.\n";

struct Args {
  bool quick = false;
  std::vector<std::string> scenarios;
  std::vector<std::string> peers;
  bool peers_given = false;
  std::string format = "table";
  std::string out;
  std::string svg;
  std::string json;
  int rounds = 0;
  int timeout_s = 0;
  double wait_for_load = 0;
  // Hidden: run one system's scenario and report to a pipe.
  std::string worker_system;
  std::string worker_scenario;
  int worker_fd = -1;
  bool worker_cpu = false;
  int worker_concurrency = 0;
};

std::vector<std::string> SplitCommas(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseInt(const std::string& text, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi) {
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

Status ParseArgs(const std::vector<std::string>& rest, Args* args) {
  for (size_t i = 0; i < rest.size(); ++i) {
    std::string flag = rest[i];
    std::string value;
    bool has_inline = false;
    if (flag.rfind("--", 0) == 0) {
      size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_inline = true;
      }
    }
    auto need = [&]() -> bool {
      if (has_inline) return true;
      if (i + 1 >= rest.size() || rest[i + 1].rfind("--", 0) == 0) return false;
      value = rest[++i];
      return true;
    };
    auto missing = [&] {
      return Status::InvalidArgument(flag + " needs a value");
    };
    if (flag == "--quick") {
      args->quick = true;
    } else if (flag == "--worker-cpu") {
      args->worker_cpu = true;
    } else if (flag == "--scenario") {
      if (!need()) return missing();
      for (const std::string& s : SplitCommas(value)) {
        if (s == "all") {
          args->scenarios = AllScenarios();
          continue;
        }
        const auto& all = AllScenarios();
        if (std::find(all.begin(), all.end(), s) == all.end()) {
          return Status::InvalidArgument("unknown scenario '" + s + "'");
        }
        args->scenarios.push_back(s);
      }
    } else if (flag == "--peers") {
      if (!need()) return missing();
      args->peers_given = true;
      args->peers.clear();
      for (const std::string& p : SplitCommas(value)) {
        if (p == "none") continue;
        if (p == "all") {
          args->peers = AllPeers();
          continue;
        }
        const auto& all = AllPeers();
        if (std::find(all.begin(), all.end(), p) == all.end()) {
          return Status::InvalidArgument("unknown peer '" + p + "'");
        }
        args->peers.push_back(p);
      }
    } else if (flag == "--format") {
      if (!need()) return missing();
      if (value != "table" && value != "json" && value != "markdown") {
        return Status::InvalidArgument(
            "--format must be table, json or "
            "markdown");
      }
      args->format = value;
    } else if (flag == "--out") {
      if (!need()) return missing();
      args->out = value;
    } else if (flag == "--svg") {
      if (!need()) return missing();
      args->svg = value;
    } else if (flag == "--json") {
      if (!need()) return missing();
      args->json = value;
    } else if (flag == "--rounds") {
      if (!need() || !ParseInt(value, 1, 100, &args->rounds)) {
        return Status::InvalidArgument("--rounds needs a number in [1, 100]");
      }
    } else if (flag == "--timeout") {
      if (!need() || !ParseInt(value, 1, 86400, &args->timeout_s)) {
        return Status::InvalidArgument("--timeout needs seconds in [1, 86400]");
      }
    } else if (flag == "--wait-for-load") {
      if (!need()) return missing();
      args->wait_for_load = std::strtod(value.c_str(), nullptr);
      if (args->wait_for_load <= 0) {
        return Status::InvalidArgument("--wait-for-load needs a load > 0");
      }
    } else if (flag == "--worker") {
      if (!need()) return missing();
      args->worker_system = value;
    } else if (flag == "--worker-scenario") {
      if (!need()) return missing();
      args->worker_scenario = value;
    } else if (flag == "--worker-fd") {
      if (!need() || !ParseInt(value, 0, 1 << 20, &args->worker_fd)) {
        return Status::InvalidArgument("--worker-fd needs a descriptor");
      }
    } else if (flag == "--worker-concurrency") {
      if (!need() || !ParseInt(value, 1, 4096, &args->worker_concurrency)) {
        return Status::InvalidArgument("--worker-concurrency needs a number");
      }
    } else {
      return Status::InvalidArgument("unknown argument '" + rest[i] + "'");
    }
  }
  if (args->scenarios.empty()) args->scenarios = AllScenarios();
  if (!args->peers_given) args->peers = AllPeers();
  // Canonical order, no duplicates.
  std::vector<std::string> ordered;
  for (const std::string& s : AllScenarios()) {
    if (std::find(args->scenarios.begin(), args->scenarios.end(), s) !=
        args->scenarios.end()) {
      ordered.push_back(s);
    }
  }
  args->scenarios = ordered;
  ordered.clear();
  for (const std::string& p : AllPeers()) {
    if (std::find(args->peers.begin(), args->peers.end(), p) !=
        args->peers.end()) {
      ordered.push_back(p);
    }
  }
  args->peers = ordered;
  return Status::OK();
}

// Loads spool's options the way every spool executable does; the path is a
// placeholder, replaced by a fresh directory per round.
Status LoadSpoolOptions(const CommandLine& cl, Options* options) {
  Options loaded;
  loaded.path = "(a fresh directory per round)";
  Status s =
      cl.config_path.empty()
          ? ParseOptions("", "<built-in defaults>", cl.overrides, &loaded)
          : LoadOptions(cl.config_path, cl.overrides, &loaded);
  if (!s.ok()) return s;
  *options = loaded;
  return Status::OK();
}

std::string DescribeSpoolConfig(const CommandLine& cl, const Options& o) {
  std::string source =
      cl.config_path.empty() ? "built-in defaults" : cl.config_path;
  for (const std::string& set : cl.overrides) source += " + --set " + set;
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "%s: durability=%s, readers=%d, workers=%d, scheduler_threads=%d, "
      "writer.max_batch=%zu, max_payload_bytes=%zu, close_timeout_ms=%lld, "
      "log.level=%s. spool-bench sets storage.path to a fresh directory per "
      "round, storage.durability per variant (sync; enqueue also relaxed) and "
      "runtime.workers for drain (1 and N = %d)",
      source.c_str(), DurabilityName(o.durability), o.readers, o.workers,
      o.scheduler_threads, o.writer_max_batch, o.max_payload_bytes,
      static_cast<long long>(o.close_timeout.count()),
      LogLevelName(o.log_level), o.workers);
  return buf;
}

std::string NowUtc() {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string CommandText(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = i == 0 ? "spool-bench" : argv[i];
    bool quote = a.find_first_of(" \t'\"$") != std::string::npos;
    out += (i ? " " : "") + (quote ? "'" + a + "'" : a);
  }
  return out;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  return Status::OK();
}

// ---- Worker mode ----

int RunWorker(const Args& args, const Options& options) {
  // Keep the report pipe out of the servers the peers start.
  fcntl(args.worker_fd, F_SETFD, FD_CLOEXEC);
  std::signal(SIGPIPE, SIG_IGN);
  Reporter out(args.worker_fd);
  Plan plan = MakePlan(args.quick, args.rounds);
  Status s;
  if (args.worker_system == "spool") {
    s = RunSpoolScenario(args.worker_scenario, plan, options, &out);
  } else {
    int concurrency =
        args.worker_concurrency > 0 ? args.worker_concurrency : options.workers;
    s = RunPeerScenario(args.worker_system, args.worker_scenario, plan,
                        concurrency, args.worker_cpu, &out);
    if (s.IsNotSupported()) {
      out.Info("skipped", s.message());
      return 0;
    }
  }
  if (!s.ok()) {
    out.Error(s.ToString());
    return 1;
  }
  return 0;
}

// ---- Orchestration ----

// Above this 1-minute load average (on 2 cores), a figure is flagged.
constexpr double kBusyLoad = 1.5;

struct Job {
  std::string system;
  std::string scenario;
  bool with_cpu = false;
};

std::vector<Job> PlanJobs(const Args& args) {
  auto selected = [&](const char* s) {
    return std::find(args.scenarios.begin(), args.scenarios.end(), s) !=
           args.scenarios.end();
  };
  std::vector<Job> jobs;
  for (const std::string& scenario : args.scenarios) {
    jobs.push_back({"spool", scenario, false});
    for (const std::string& peer : args.peers) {
      if (scenario == "enqueue") {
        jobs.push_back({peer, scenario, selected("caller_thread")});
      } else if (scenario == "drain" && !IsLimitPeer(peer)) {
        jobs.push_back({peer, scenario, false});
      } else if (scenario == "caller_thread" && !selected("enqueue")) {
        // Otherwise measured within the peer's enqueue scenario.
        jobs.push_back({peer, scenario, true});
      }
    }
  }
  return jobs;
}

void WaitForLoad(double max_load) {
  auto deadline = SteadyClock::now() + std::chrono::minutes(15);
  while (true) {
    double load = LoadAverages()[0];
    if (load <= max_load) {
      Progress("load average %.2f <= %.2f: starting", load, max_load);
      return;
    }
    if (SteadyClock::now() >= deadline) {
      Progress("load average still %.2f after 15 min; starting anyway", load);
      return;
    }
    Progress("load average %.2f > %.2f: waiting", load, max_load);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
}

int RunParent(int argc, char** argv, const Args& args, const CommandLine& cl,
              const Options& options) {
  if (args.wait_for_load > 0) WaitForLoad(args.wait_for_load);
  auto started = SteadyClock::now();
  RunReport report;
  report.plan = MakePlan(args.quick, args.rounds);
  report.command = CommandText(argc, argv);
  report.started_at = NowUtc();
  report.scenarios = args.scenarios;
  report.peers = args.peers;
  report.spool_config = DescribeSpoolConfig(cl, options);
  report.machine = DescribeMachine(BaseTempDir());
  if (report.machine.load_start[0] > kBusyLoad) {
    report.notes.push_back(
        "The 1-minute load average was " +
        FormatValue(report.machine.load_start[0]) +
        " when the run started: other work on this machine may have "
        "disturbed the figures.");
  }
  report.systems["spool"] =
      "spool " + report.machine.versions["spool"] + " on RocksDB " +
      report.machine.versions["rocksdb"] + " and CAF " +
      report.machine.versions["caf"] +
      "; sync: the write-ahead log is fsynced before a task counts as "
      "stored (one writer actor, group commit); relaxed: not fsynced";

  const int timeout_s =
      args.timeout_s > 0 ? args.timeout_s : (args.quick ? 300 : 1800);
  std::vector<Job> jobs = PlanJobs(args);
  std::set<std::string> skipped;
  bool failed = false;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    if (skipped.count(job.system)) continue;
    Progress("(%zu/%zu) %s: %s", i + 1, jobs.size(), job.system.c_str(),
             job.scenario.c_str());
    std::vector<std::string> child = {"--worker",
                                      job.system,
                                      "--worker-scenario",
                                      job.scenario,
                                      "--rounds",
                                      std::to_string(report.plan.rounds),
                                      "--worker-concurrency",
                                      std::to_string(options.workers)};
    if (args.quick) child.push_back("--quick");
    if (job.with_cpu) child.push_back("--worker-cpu");
    if (!cl.config_path.empty()) {
      child.push_back("--config");
      child.push_back(cl.config_path);
    }
    for (const std::string& set : cl.overrides) {
      child.push_back("--set");
      child.push_back(set);
    }
    const double load_before = LoadAverages()[0];
    WorkerResult result =
        RunWorkerProcess(child, std::chrono::seconds(timeout_s));
    const double load_after = LoadAverages()[0];
    // The 1-minute average lags: a job that ran during other engineers'
    // builds shows it at its end more than at its start.
    if (std::max(load_before, load_after) > kBusyLoad) {
      report.notes.push_back("Load average " + FormatValue(load_before) +
                             " → " + FormatValue(load_after) + " during " +
                             job.system + " " + job.scenario +
                             ": its figures may be disturbed.");
    }
    Progress("(%zu/%zu) %s: %s done in %.1f s%s%s", i + 1, jobs.size(),
             job.system.c_str(), job.scenario.c_str(), result.seconds,
             result.failure.empty() ? "" : ": ", result.failure.c_str());
    report.rows.insert(report.rows.end(), result.rows.begin(),
                       result.rows.end());
    for (const std::string& n : result.notes) report.notes.push_back(n);
    if (auto d = result.info.find("describe"); d != result.info.end()) {
      // Peer::Describe starts with the peer's name, which is the key here.
      std::string text = d->second;
      if (text.rfind(job.system + ": ", 0) == 0) {
        text = text.substr(job.system.size() + 2);
      }
      report.systems[job.system] = text;
    }
    if (result.info.count("skipped")) {
      skipped.insert(job.system);
      report.systems[job.system] = "skipped: " + result.info["skipped"];
    }
    for (const std::string& e : result.errors) {
      report.notes.push_back(job.system + " " + job.scenario + " failed: " + e);
      failed = true;
    }
    if (!result.failure.empty()) {
      report.notes.push_back(
          job.system + " " + job.scenario + ": the worker " + result.failure +
          (result.rows.empty() ? "; no figures"
                               : "; the " + std::to_string(result.rows.size()) +
                                     " figures it reported first are kept"));
      failed = true;
    }
  }
  report.machine.load_end = LoadAverages();
  report.duration_s = MicrosBetween(started, SteadyClock::now()) / 1e6;

  std::string text;
  if (args.format == "json") {
    text = FormatJson(report);
  } else if (args.format == "markdown") {
    std::string chart;
    if (!args.svg.empty()) {
      size_t slash = args.svg.rfind('/');
      chart =
          slash == std::string::npos ? args.svg : args.svg.substr(slash + 1);
    }
    text = FormatMarkdown(report, chart);
  } else {
    text = FormatTable(report);
  }
  if (args.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    Status s = WriteFile(args.out, text);
    if (!s.ok()) {
      std::fprintf(stderr, "spool-bench: %s\n", s.ToString().c_str());
      return 1;
    }
    Progress("report written to %s", args.out.c_str());
  }
  if (!args.json.empty()) {
    Status s = WriteFile(args.json, FormatJson(report));
    if (!s.ok()) {
      std::fprintf(stderr, "spool-bench: %s\n", s.ToString().c_str());
      return 1;
    }
    Progress("JSON written to %s", args.json.c_str());
  }
  if (!args.svg.empty()) {
    Status s = WriteFile(args.svg, RenderSvg(report));
    if (!s.ok()) {
      std::fprintf(stderr, "spool-bench: %s\n", s.ToString().c_str());
      return 1;
    }
    Progress("chart written to %s", args.svg.c_str());
  }
  Progress("done in %.0f s%s", report.duration_s,
           failed ? "; some measurements failed (see the notes)" : "");
  return failed ? 1 : 0;
}

int Main(int argc, char** argv) {
  CommandLine cl;
  Status s = ParseCommandLine(argc, argv, &cl);
  Args args;
  if (s.ok()) s = ParseArgs(cl.rest, &args);
  if (!s.ok()) {
    std::fprintf(stderr, "spool-bench: %s\n%s", s.ToString().c_str(), kUsage);
    return 2;
  }
  if (cl.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Options options;
  s = LoadSpoolOptions(cl, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "spool-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  if (cl.print_config) {
    ConfigSources sources;
    s = LoadConfigSources(cl.config_path, cl.overrides, &sources);
    if (!s.ok()) {
      std::fprintf(stderr, "spool-bench: %s\n", s.ToString().c_str());
      return 2;
    }
    std::fputs(DescribeOptions(options, sources).c_str(), stdout);
    return 0;
  }
  if (!args.worker_system.empty()) {
    if (args.worker_fd < 0 || args.worker_scenario.empty()) {
      std::fprintf(stderr, "spool-bench: --worker needs its other flags\n");
      return 2;
    }
    return RunWorker(args, options);
  }
  return RunParent(argc, argv, args, cl, options);
}

}  // namespace
}  // namespace spool::bench

int main(int argc, char** argv) { return spool::bench::Main(argc, argv); }
