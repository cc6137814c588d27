// A process for the outbox crash test to kill: commits, forever, batches of
// one application key and one task (spool/app_batch.h), and says
// "ack N ID" once batch N (key "order/R/N", task ID with payload
// "order/R/N") is stored.
//
//   outbox_child DIR R

#include <condition_variable>
#include <mutex>
#include <string>

#include <spool/app_batch.h>
#include <spool/runtime.h>

#include "tests/child_output.h"

namespace {

using spool::testing::Die;
using spool::testing::Say;

int CommitForever(const std::string& dir, const std::string& round) {
  spool::Options options;
  options.path = dir;
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) Die(s);
  s = runtime->RegisterHandler(
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
    std::string key = "order/" + round + "/" + std::to_string(i);
    spool::AppBatch batch;
    s = batch.Put(key, "paid");
    if (!s.ok()) Die(s);
    batch.Enqueue({"work", key, {}});
    spool::BatchTicket ticket = runtime->CommitAppBatch(std::move(batch));
    ticket.stored.Then(
        [&, i](const spool::Result<std::vector<spool::TaskId>>& stored) {
          if (stored.ok()) {
            Say("ack " + std::to_string(i) + " " +
                std::to_string(stored->front()));
          }
          std::lock_guard<std::mutex> lock(mutex);
          --in_flight;
          room.notify_one();
        });
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    Die(spool::Status::InvalidArgument("usage: outbox_child DIR ROUND"));
  }
  return CommitForever(argv[1], argv[2]);
}
