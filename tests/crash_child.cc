// A process for crash tests to kill. It reports on stdout, one line per
// event, so that the parent knows what was acknowledged before the kill.
//
//   crash_child enqueue DIR          enqueues forever; "ack ID" per stored task
//   crash_child hang DIR N [--once]  enqueues N tasks whose handler prints
//                                    "started ID ATTEMPT" and never returns;
//                                    with --once they allow one attempt
//   crash_child suicide DIR [--enqueue]
//                                    runs tasks whose handler kills the
//                                    process; with --enqueue adds one first
//   crash_child controls DIR         pauses type "work", closes gate "g"
//                                    (type "gated" requires it), enqueues
//                                    one task of each, says "ready WORK
//                                    GATED" once the controls are stored,
//                                    and waits to be killed

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

#include <spool/runtime.h>

#include "tests/child_output.h"

namespace {

using namespace std::chrono_literals;

using spool::testing::Die;
using spool::testing::Say;

std::unique_ptr<spool::Runtime> OpenAt(const std::string& dir) {
  spool::Options options;
  options.path = dir;
  options.workers = 4;
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) Die(s);
  return runtime;
}

int EnqueueForever(const std::string& dir) {
  auto runtime = OpenAt(dir);
  spool::Status s = runtime->RegisterHandler(
      "work", [](spool::TaskContext&) { return spool::Status::OK(); });
  if (!s.ok()) Die(s);
  std::mutex mutex;
  std::condition_variable room;
  int in_flight = 0;
  for (uint64_t i = 0;; ++i) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      room.wait(lock, [&] { return in_flight < 64; });
      ++in_flight;
    }
    spool::Ticket ticket =
        runtime->Enqueue("work", "payload " + std::to_string(i));
    ticket.stored.Then([&](const spool::Result<spool::TaskId>& stored) {
      if (stored.ok()) Say("ack " + std::to_string(*stored));
      std::lock_guard<std::mutex> lock(mutex);
      --in_flight;
      room.notify_one();
    });
  }
}

int Hang(const std::string& dir, int count, bool once) {
  auto runtime = OpenAt(dir);
  spool::HandlerOptions handler_options;
  handler_options.retry =
      once ? spool::RetryPolicy::None() : spool::RetryPolicy::Fixed(3, 0us);
  spool::Status s = runtime->RegisterHandler(
      "work",
      [](spool::TaskContext& task) {
        Say("started " + std::to_string(task.id()) + " " +
            std::to_string(task.attempt()));
        for (;;) std::this_thread::sleep_for(1h);
        return spool::Status::OK();
      },
      handler_options);
  if (!s.ok()) Die(s);
  for (int i = 0; i < count; ++i) {
    const auto stored = runtime->Enqueue("work", "x").stored.Wait();
    if (!stored.ok()) Die(stored.status());
  }
  s = runtime->Start();
  if (!s.ok()) Die(s);
  for (;;) std::this_thread::sleep_for(1h);
}

int Suicide(const std::string& dir, bool enqueue) {
  auto runtime = OpenAt(dir);
  spool::HandlerOptions handler_options;
  handler_options.retry = spool::RetryPolicy::Fixed(3, 0us);
  spool::Status s = runtime->RegisterHandler(
      "work",
      [](spool::TaskContext& task) {
        Say("started " + std::to_string(task.id()) + " " +
            std::to_string(task.attempt()));
        std::raise(SIGKILL);
        return spool::Status::OK();
      },
      handler_options);
  if (!s.ok()) Die(s);
  if (enqueue) {
    const auto stored = runtime->Enqueue("work", "x").stored.Wait();
    if (!stored.ok()) Die(stored.status());
    Say("enqueued " + std::to_string(*stored));
  }
  s = runtime->Start();
  if (!s.ok()) Die(s);
  // Nothing to run (the task failed for good): say so and leave.
  const auto drained = runtime->Drain().Wait();
  if (!drained.ok()) Die(drained.status());
  Say("idle");
  return 0;
}

int Controls(const std::string& dir) {
  auto runtime = OpenAt(dir);
  spool::HandlerOptions gated;
  gated.requires_gates.emplace(std::vector<std::string>{"g"});
  auto ok = [](spool::TaskContext&) { return spool::Status::OK(); };
  spool::Status s = runtime->RegisterHandler("work", ok);
  if (s.ok()) s = runtime->RegisterHandler("gated", ok, gated);
  if (s.ok()) s = runtime->Start();
  if (s.ok()) s = runtime->PauseType("work");
  if (s.ok()) s = runtime->SetGate("g", false);
  if (!s.ok()) Die(s);
  // The scheduler sends the controls to the writer before it answers a
  // Drain; what is enqueued after that is committed after them, so these
  // acknowledgements say the controls are stored.
  const auto drained = runtime->Drain().Wait();
  if (!drained.ok()) Die(drained.status());
  const auto work = runtime->Enqueue("work", "x").stored.Wait();
  const auto gate = runtime->Enqueue("gated", "x").stored.Wait();
  if (!work.ok()) Die(work.status());
  if (!gate.ok()) Die(gate.status());
  Say("ready " + std::to_string(*work) + " " + std::to_string(*gate));
  for (;;) std::this_thread::sleep_for(1h);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "enqueue") == 0) {
    return EnqueueForever(argv[2]);
  }
  if (argc >= 4 && std::strcmp(argv[1], "hang") == 0) {
    return Hang(argv[2], std::atoi(argv[3]),
                argc >= 5 && std::strcmp(argv[4], "--once") == 0);
  }
  if (argc >= 3 && std::strcmp(argv[1], "suicide") == 0) {
    return Suicide(argv[2],
                   argc >= 4 && std::strcmp(argv[3], "--enqueue") == 0);
  }
  if (argc >= 3 && std::strcmp(argv[1], "controls") == 0) {
    return Controls(argv[2]);
  }
  std::fprintf(stderr,
               "usage: crash_child enqueue|hang|suicide|controls DIR ...\n");
  return 2;
}
