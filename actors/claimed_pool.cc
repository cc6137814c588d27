#include "actors/claimed_pool.h"

#include <algorithm>

namespace spool::actors {

void ClaimedPool::Push(ClaimedTask task) {
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
}

std::optional<ClaimedTask> ClaimedPool::Pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tasks_.empty()) return std::nullopt;
  ClaimedTask task = std::move(tasks_.front());
  tasks_.pop_front();
  return task;
}

std::optional<ClaimedTask> ClaimedPool::PopIf(
    const std::function<bool(const ClaimedTask&)>& match) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(tasks_.begin(), tasks_.end(), match);
  if (it == tasks_.end()) return std::nullopt;
  ClaimedTask task = std::move(*it);
  tasks_.erase(it);
  return task;
}

std::vector<ClaimedTask> ClaimedPool::Recall(
    const std::function<bool(const ClaimedTask&)>& match) {
  std::vector<ClaimedTask> recalled;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (match(*it)) {
      recalled.push_back(std::move(*it));
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
  return recalled;
}

size_t ClaimedPool::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tasks_.size();
}

}  // namespace spool::actors
