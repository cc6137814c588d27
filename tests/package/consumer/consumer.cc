// A program outside spool's tree, as a user's project would have it: it
// sees only the installed headers (or, through add_subdirectory, spool's
// targets). It opens a queue in the directory argv[1], runs one task
// through a handler, checks the outcome and prints what it found.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <spool/runtime.h>
#include <spool/version.h>

namespace {

int Fail(const char* step, const spool::Status& s) {
  std::fprintf(stderr, "consumer: %s: %s\n", step, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DIR\n");
    return 2;
  }
  // The headers compiled against and the library linked are one version.
  if (std::strcmp(spool::Version(), SPOOL_VERSION_STRING) != 0) {
    std::fprintf(stderr, "consumer: headers %s, library %s\n",
                 SPOOL_VERSION_STRING, spool::Version());
    return 1;
  }
  std::printf("spool %s\n", spool::Version());

  spool::Options options;
  options.path = argv[1];
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) return Fail("open", s);

  std::atomic<int> runs{0};
  std::string seen;
  s = runtime->RegisterHandler("echo", [&](spool::TaskContext& task) {
    seen = std::string(task.payload());
    runs.fetch_add(1);
    return spool::Status::OK();
  });
  if (s.ok()) s = runtime->Start();
  if (!s.ok()) return Fail("start", s);

  spool::Ticket ticket = runtime->Enqueue("echo", "from a consumer");
  spool::Result<spool::TaskId> id = ticket.stored.Wait();
  if (!id.ok()) return Fail("enqueue", id.status());
  spool::Result<void> drained = runtime->Drain().Wait();
  if (!drained.ok()) return Fail("drain", drained.status());
  spool::Result<spool::TaskInfo> info = runtime->GetTask(*id).Wait();
  if (!info.ok()) return Fail("get", info.status());
  spool::Result<void> closed = runtime->Close().Wait();
  if (!closed.ok()) return Fail("close", closed.status());

  if (runs.load() != 1 || seen != "from a consumer" ||
      info->status != spool::TaskStatus::kSucceeded || info->attempts != 1) {
    std::fprintf(stderr, "consumer: runs=%d payload='%s' attempts=%u\n",
                 runs.load(), seen.c_str(), info->attempts);
    return 1;
  }
  std::printf("task %llu succeeded\n", static_cast<unsigned long long>(*id));
  return 0;
}
