// The README's embedding example: open a queue, register a handler, enqueue,
// and wait for the work to finish.
#include <cstdio>
#include <string>

#include <spool/runtime.h>

int main(int argc, char** argv) {
  spool::Options options;
  options.path = argc > 1 ? argv[1] : "./example-queue";

  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.ToString().c_str());
    return 1;
  }

  // Handlers run on spool's worker threads. Return an error (or throw) to
  // fail the attempt; the retry policy decides what happens next.
  s = runtime->RegisterHandler("greet", [](spool::TaskContext& task) {
    std::printf("hello, %s (task %llu, attempt %u)\n",
                std::string(task.payload()).c_str(),
                static_cast<unsigned long long>(task.id()), task.attempt());
    return spool::Status::OK();
  });
  if (s.ok()) s = runtime->Start();
  if (!s.ok()) {
    std::fprintf(stderr, "start: %s\n", s.ToString().c_str());
    return 1;
  }

  // Enqueue returns at once. The ticket's future resolves when the task is
  // on disk; Then runs a callback on a spool thread instead of waiting.
  spool::Ticket ticket = runtime->Enqueue("greet", "world");
  ticket.stored.Then([](const spool::Result<spool::TaskId>& stored) {
    if (!stored.ok()) {
      std::fprintf(stderr, "enqueue: %s\n", stored.status().ToString().c_str());
    }
  });

  // Wait until nothing is left to run, then close (the destructor would too).
  spool::Result<void> drained = runtime->Drain().Wait();
  if (!drained.ok()) {
    std::fprintf(stderr, "drain: %s\n", drained.status().ToString().c_str());
  }
  spool::Result<void> closed = runtime->Close().Wait();
  return drained.ok() && closed.ok() ? 0 : 1;
}
