// A process that holds a queue and keeps it busy, for the tests and the
// benchmark of read-only inspection (tests/cli_test.cc,
// benchmarks/cli_bench.cc). It reports on stdout.
//
//   live_queue_child DIR [--tasks N] [--key-file FILE] [--no-start]
//
// Opens DIR, stores N tasks of type "work" (default 100) in batches, one in
// ten of type "flaky" (which fails for good), prints "ready N" once they
// are stored, then starts the workers (unless --no-start) and enqueues one
// more "work" task every 5 ms, forever, printing "ack ID" for each.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/runtime.h>

#include "tests/child_output.h"

using spool::testing::Die;
using spool::testing::Say;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: live_queue_child DIR [--tasks N] [--key-file FILE] "
                 "[--no-start]\n");
    return 2;
  }
  spool::Options options;
  options.path = argv[1];
  options.durability = spool::Durability::kRelaxed;
  long tasks = 100;
  bool start = true;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tasks") == 0 && i + 1 < argc) {
      tasks = std::strtol(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--key-file") == 0 && i + 1 < argc) {
      options.encryption_key_file = argv[++i];
    } else if (std::strcmp(argv[i], "--no-start") == 0) {
      start = false;
    }
  }
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) Die(s);
  s = runtime->RegisterHandler(
      "work", [](spool::TaskContext&) { return spool::Status::OK(); });
  if (!s.ok()) Die(s);
  spool::HandlerOptions once;
  once.retry = spool::RetryPolicy::None();
  s = runtime->RegisterHandler(
      "flaky",
      [](spool::TaskContext&) { return spool::Status::Aborted("flaky fails"); },
      once);
  if (!s.ok()) Die(s);
  for (long done = 0; done < tasks;) {
    std::vector<spool::TaskSpec> batch;
    for (; done < tasks && batch.size() < 1000; ++done) {
      spool::TaskSpec task;
      task.type = done % 10 == 9 ? "flaky" : "work";
      task.payload = "payload " + std::to_string(done);
      if (done % 3 == 0) task.options.group = "g" + std::to_string(done % 4);
      batch.push_back(std::move(task));
    }
    const auto& stored = runtime->EnqueueBatch(std::move(batch)).stored.Wait();
    if (!stored.ok()) Die(stored.status());
  }
  Say("ready " + std::to_string(tasks));
  if (start) {
    s = runtime->Start();
    if (!s.ok()) Die(s);
  }
  for (;;) {
    const auto& stored = runtime->Enqueue("work", "more").stored.Wait();
    if (!stored.ok()) Die(stored.status());
    Say("ack " + std::to_string(*stored));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}
