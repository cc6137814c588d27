// ThreadExecutor: the default callback executor, one thread that runs
// Future::Then callbacks in order.

#ifndef SPOOL_RUNTIME_THREAD_EXECUTOR_H_
#define SPOOL_RUNTIME_THREAD_EXECUTOR_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <spool/future.h>

namespace spool {

class ThreadExecutor final : public Executor {
 public:
  ThreadExecutor();
  // Shuts down (see Shutdown).
  ~ThreadExecutor() override;

  // Queues `fn` for the executor's thread. After Shutdown, runs it inline:
  // a callback is never dropped.
  void Post(std::function<void()> fn) override;

  // Runs what is queued, then stops the thread. Idempotent. Must not be
  // called from the executor's own thread.
  void Shutdown();

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace spool

#endif  // SPOOL_RUNTIME_THREAD_EXECUTOR_H_
