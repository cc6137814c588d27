// StartLog: which claimed attempts had started when the process stopped.
//
// A claim is durable before its task may start, and counts its attempt, so
// that a handler which crashes the process cannot run forever. Tasks are
// claimed ahead of the workers (actors/claimed_pool.h), so a crash also
// finds claims whose handler never began; counting those would spend an
// attempt that never happened (and fail a task that allows one attempt).
//
// The start log tells the two apart without a write on the run path. It is
// a small file in the storage directory, mapped into memory: one slot per
// attempt in flight, into which a worker stores the task id and attempt
// right before the handler starts, and which the scheduler clears once the
// attempt's outcome is durable. The stores are plain memory writes into a
// shared file mapping: no system call, no sync. They live in the kernel's
// page cache, so they survive the process being killed, but not the machine
// going down. The file therefore records the boot it was written in
// (/proc/sys/kernel/random/boot_id): recovery trusts it only in the same
// boot, and otherwise counts every interrupted claim, as if it had started.
//
// Layout (little-endian, the host's):
//   0    8    magic "SPSTARTS"
//   8    4    format version (1)
//   12   4    slot count
//   16   48   boot id, NUL-padded
//   64   16n  slots: task id (8), then attempt (4) and check (4) as one
//             8-byte word written last; a slot whose check does not match
//             its id and attempt is empty (cleared, or torn by a kill
//             before the handler began).
//
// Thread safety: Record and Clear may be called from any thread for distinct
// slots; the rest belongs to one thread.

#ifndef SPOOL_STORAGE_START_LOG_H_
#define SPOOL_STORAGE_START_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include <spool/status.h>
#include <spool/task.h>

namespace spool::storage {

class StartLog {
 public:
  // No slot: the attempt is not recorded (a runtime without a start log).
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  // Opens (or creates) the start log in directory `dir` and reads what the
  // previous process recorded; the file is not changed until Reset. IOError
  // when the file cannot be created or mapped.
  static Status Open(const std::string& dir, std::unique_ptr<StartLog>* log);

  ~StartLog();
  StartLog(const StartLog&) = delete;
  StartLog& operator=(const StartLog&) = delete;

  // Whether the previous process's records can be trusted: the file was
  // written in this boot, and is whole. When false, PreviouslyStarted must
  // not be asked; why_untrusted() says why.
  bool previous_trusted() const { return previous_trusted_; }
  const std::string& why_untrusted() const { return why_untrusted_; }
  // Whether the previous process recorded the start of this attempt.
  bool PreviouslyStarted(TaskId id, uint32_t attempt) const;

  // Starts this process's records with `slots` slots, all empty, and
  // forgets the previous process's. Call it once recovery has committed
  // what it decided from them: a crash before that must find them again.
  Status Reset(uint32_t slots);

  uint32_t slots() const { return slots_; }
  // Records that the attempt in `slot` starts now. REQUIRES: slot < slots().
  void Record(uint32_t slot, TaskId id, uint32_t attempt);
  // Empties `slot`: its attempt's outcome is durable.
  void Clear(uint32_t slot);

 private:
  StartLog() = default;
  Status Map(size_t bytes);
  void Unmap();

  std::string path_;
  int fd_ = -1;
  char* base_ = nullptr;
  size_t mapped_ = 0;
  uint32_t slots_ = 0;
  bool previous_trusted_ = false;
  std::string why_untrusted_;
  // The attempts the previous process recorded.
  struct Started {
    TaskId id;
    uint32_t attempt;
    bool operator==(const Started& o) const {
      return id == o.id && attempt == o.attempt;
    }
  };
  struct StartedHash {
    size_t operator()(const Started& s) const {
      return std::hash<uint64_t>{}(s.id * 0x9e3779b97f4a7c15ull ^ s.attempt);
    }
  };
  std::unordered_set<Started, StartedHash> previous_;
};

// The kernel's id of the current boot, or "" where there is none.
std::string CurrentBootId();

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_START_LOG_H_
