// spool-cli-bench: the `spool` tool on a live queue (docs/benchmarks.md,
// "The spool tool").
//
//   spool-cli-bench [--tasks N] [--runs R] [--dir DIR] [--compare SPOOL]
//
// A forked process opens DIR, stores N tasks (default 100,000) and then
// keeps the queue live: its workers run the tasks and it enqueues one more
// every 5 ms. Meanwhile this process runs the built `spool` binary, as a
// user would, R times each:
//   - `spool stats DIR --json`: wall time per run, process start included;
//   - `spool export DIR > /dev/null`: tasks/s and the tool's peak RSS
//     (getrusage of the child).
// With --compare, the runs alternate between the built tool and SPOOL
// (another build of it, e.g. the one before a change), on the same live
// queue, and both medians are reported: a before/after in one run.
// Goals (issue 16): stats <= 100 ms; export >= 200,000 tasks/s, bounded
// memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/runtime.h>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "spool-cli-bench: %s\n", what.c_str());
  std::exit(1);
}

// The holder: fills the queue, tells the parent on `ready_fd`, runs it.
[[noreturn]] void Hold(const std::string& dir, long tasks, int ready_fd) {
  spool::Options options;
  options.path = dir;
  options.durability = spool::Durability::kRelaxed;
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) Die(s.ToString());
  s = runtime->RegisterHandler(
      "work", [](spool::TaskContext&) { return spool::Status::OK(); });
  if (!s.ok()) Die(s.ToString());
  std::string payload(100, 'p');
  for (long done = 0; done < tasks;) {
    std::vector<spool::TaskSpec> batch;
    for (; done < tasks && batch.size() < 1000; ++done) {
      batch.push_back(spool::TaskSpec{"work", payload, {}});
    }
    const auto& stored = runtime->EnqueueBatch(std::move(batch)).stored.Wait();
    if (!stored.ok()) Die(stored.status().ToString());
  }
  s = runtime->Start();
  if (!s.ok()) Die(s.ToString());
  char ready = 'r';
  if (write(ready_fd, &ready, 1) != 1) Die("cannot tell the parent");
  close(ready_fd);
  for (;;) {
    const auto& stored = runtime->Enqueue("work", payload).stored.Wait();
    if (!stored.ok()) Die(stored.status().ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

struct ToolRun {
  double seconds = 0;
  long max_rss_kb = 0;
  int exit_code = -1;
  size_t lines = 0;
};

// Runs `tool args...` with stdout to a pipe whose lines are counted.
ToolRun RunTool(const std::string& tool, const std::vector<std::string>& args) {
  int out[2];
  if (pipe(out) != 0) Die("pipe");
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<std::string> argv = {tool};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
  close(out[1]);
  ToolRun run;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    ssize_t n = read(out[0], buffer.data(), buffer.size());
    if (n <= 0) break;
    run.lines +=
        static_cast<size_t>(std::count(buffer.data(), buffer.data() + n, '\n'));
  }
  close(out[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.max_rss_kb = usage.ru_maxrss;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long tasks = 100000;
  int runs = 5;
  std::string dir;
  std::string compare;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tasks") == 0 && i + 1 < argc) {
      tasks = std::strtol(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (std::strcmp(argv[i], "--compare") == 0 && i + 1 < argc) {
      compare = argv[++i];
    } else {
      Die(std::string("unknown argument ") + argv[i]);
    }
  }
  if (tasks <= 0 || runs <= 0) Die("--tasks and --runs must be > 0");
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "spool-cli-bench-XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) Die("mkdtemp");
    dir = pattern + "/queue";
  }

  int ready[2];
  if (pipe(ready) != 0) Die("pipe");
  auto fill_start = Clock::now();
  pid_t holder = fork();
  if (holder == 0) {
    close(ready[0]);
    Hold(dir, tasks, ready[1]);
  }
  close(ready[1]);
  char byte = 0;
  if (read(ready[0], &byte, 1) != 1) Die("the holder failed");
  close(ready[0]);
  double fill =
      std::chrono::duration<double>(Clock::now() - fill_start).count();
  std::printf("live queue: %ld tasks stored in %.2f s, held by pid %d\n", tasks,
              fill, static_cast<int>(holder));

  // The tools measured, run in turn: the built one, and --compare's.
  std::vector<std::string> tools = {SPOOL_CLI};
  if (!compare.empty()) tools.push_back(compare);
  auto label = [&](size_t t) {
    return tools.size() == 1 ? std::string() : " [" + tools[t] + "]";
  };

  std::vector<std::vector<double>> stats_ms(tools.size());
  for (int i = 0; i < runs; ++i) {
    for (size_t t = 0; t < tools.size(); ++t) {
      ToolRun run = RunTool(tools[t], {"stats", dir, "--json"});
      if (run.exit_code != 0) Die("spool stats failed");
      stats_ms[t].push_back(run.seconds * 1000);
    }
  }
  for (size_t t = 0; t < tools.size(); ++t) {
    std::printf("stats --json%s: median %.1f ms, max %.1f ms over %d runs\n",
                label(t).c_str(), Median(stats_ms[t]),
                *std::max_element(stats_ms[t].begin(), stats_ms[t].end()),
                runs);
  }

  std::vector<std::vector<double>> rates(tools.size());
  std::vector<long> max_rss(tools.size(), 0);
  std::vector<size_t> lines(tools.size(), 0);
  for (int i = 0; i < runs; ++i) {
    for (size_t t = 0; t < tools.size(); ++t) {
      ToolRun run = RunTool(tools[t], {"export", dir});
      if (run.exit_code != 0) Die("spool export failed");
      rates[t].push_back(static_cast<double>(run.lines) / run.seconds);
      max_rss[t] = std::max(max_rss[t], run.max_rss_kb);
      lines[t] = run.lines;
    }
  }
  for (size_t t = 0; t < tools.size(); ++t) {
    std::printf(
        "export%s: median %.0f tasks/s (%zu tasks in the last run), peak RSS "
        "%.1f MiB over %d runs\n",
        label(t).c_str(), Median(rates[t]), lines[t],
        static_cast<double>(max_rss[t]) / 1024, runs);
  }

  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  if (own_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(dir).parent_path(),
                                ignored);
  }
  return 0;
}
