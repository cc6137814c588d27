// spool-demo: enqueues and runs tasks on the configured queue and prints what
// happened. A quick look at spool without writing code.
//
//   spool-demo [--config FILE] [--set section.key=value]... [--tasks N]
//              [--fail-every K]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spool/config.h>
#include <spool/runtime.h>

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int Usage(const char* error) {
  if (error) std::fprintf(stderr, "spool-demo: %s\n", error);
  std::fprintf(stderr,
               "usage: spool-demo [--config FILE] [--set section.key=value]... "
               "[--tasks N] [--fail-every K]\n");
  return error ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  spool::CommandLine command_line;
  spool::Status s = spool::ParseCommandLine(argc, argv, &command_line);
  if (!s.ok()) return Usage(s.ToString().c_str());
  if (command_line.help) return Usage(nullptr);
  long tasks = 10000;
  long fail_every = 100;
  for (size_t i = 0; i < command_line.rest.size(); ++i) {
    const std::string& arg = command_line.rest[i];
    bool has_value = i + 1 < command_line.rest.size();
    if (arg == "--tasks" && has_value) {
      tasks = std::strtol(command_line.rest[++i].c_str(), nullptr, 10);
    } else if (arg == "--fail-every" && has_value) {
      fail_every = std::strtol(command_line.rest[++i].c_str(), nullptr, 10);
    } else {
      return Usage(("unknown argument " + arg).c_str());
    }
  }
  if (tasks <= 0) return Usage("--tasks must be > 0");

  spool::Options options;
  if (!command_line.config_path.empty()) {
    s = spool::LoadOptions(command_line.config_path, command_line.overrides,
                           &options);
  } else {
    options.path = "./spool-data";
    for (const auto& o : command_line.overrides) {
      if (s.ok()) s = spool::ApplyOverride(o, &options);
    }
    if (s.ok()) s = options.Validate();
  }
  if (!s.ok()) {
    std::fprintf(stderr, "spool-demo: %s\n", s.ToString().c_str());
    return 1;
  }
  if (command_line.print_config) {
    spool::ConfigSources sources;
    s = spool::LoadConfigSources(command_line.config_path,
                                 command_line.overrides, &sources);
    if (!s.ok()) {
      std::fprintf(stderr, "spool-demo: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("%s", spool::DescribeOptions(options, sources).c_str());
    return 0;
  }

  std::unique_ptr<spool::Runtime> runtime;
  s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) {
    std::fprintf(stderr, "spool-demo: %s\n", s.ToString().c_str());
    return 1;
  }
  std::atomic<long> runs{0};
  spool::HandlerOptions handler_options;
  // Retries are due at once, so that Drain (which does not wait for tasks
  // due later) sees every task finish.
  handler_options.retry = spool::RetryPolicy::Fixed(3, spool::Duration(0));
  s = runtime->RegisterHandler(
      "demo",
      [&](spool::TaskContext& task) {
        runs++;
        // Every K-th task fails its first attempt, to show retries.
        if (fail_every > 0 && task.id() % fail_every == 0 &&
            task.attempt() == 1) {
          return spool::Status::Aborted("demo failure on the first attempt");
        }
        return spool::Status::OK();
      },
      handler_options);
  if (!s.ok()) {
    std::fprintf(stderr, "spool-demo: %s\n", s.ToString().c_str());
    return 1;
  }

  std::printf("spool-demo: %ld tasks, %s durability, %d workers, in %s\n",
              tasks, spool::DurabilityName(options.durability), options.workers,
              options.path.c_str());
  auto started = Clock::now();
  std::vector<spool::Ticket> tickets;
  tickets.reserve(static_cast<size_t>(tasks));
  for (long i = 0; i < tasks; ++i) {
    tickets.push_back(runtime->Enqueue("demo", "task " + std::to_string(i)));
  }
  auto enqueued = Clock::now();
  long stored = 0;
  for (auto& ticket : tickets) {
    const auto& result = ticket.stored.Wait();
    if (result.ok()) {
      ++stored;
    } else {
      std::fprintf(stderr, "enqueue failed: %s\n",
                   result.status().ToString().c_str());
    }
  }
  auto durable = Clock::now();
  s = runtime->Start();
  const auto drained = runtime->Drain().Wait();
  auto finished = Clock::now();
  if (!s.ok() || !drained.ok()) {
    std::fprintf(stderr, "spool-demo: %s\n",
                 (s.ok() ? drained.status() : s).ToString().c_str());
    return 1;
  }
  const auto counts = runtime->CountByStatus().Wait();
  std::printf(
      "  enqueue calls returned in %.3f s (%.0f calls/s on this thread)\n",
      Seconds(enqueued - started), tasks / Seconds(enqueued - started));
  std::printf("  all %ld stored durably after %.3f s (%.0f tasks/s)\n", stored,
              Seconds(durable - started), stored / Seconds(durable - started));
  std::printf(
      "  ran to completion in %.3f s (%.0f tasks/s), %ld handler runs\n",
      Seconds(finished - durable), stored / Seconds(finished - durable),
      runs.load());
  if (counts.ok()) {
    std::printf("  stored tasks by status:");
    for (size_t i = 0; i < spool::kTaskStatusCount; ++i) {
      auto status = static_cast<spool::TaskStatus>(i);
      if (counts->of(status) != 0) {
        std::printf(" %s=%llu", spool::TaskStatusName(status),
                    static_cast<unsigned long long>(counts->of(status)));
      }
    }
    std::printf("\n");
  }
  const auto closed = runtime->Close().Wait();
  return closed.ok() ? 0 : 1;
}
