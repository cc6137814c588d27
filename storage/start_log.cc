#include "storage/start_log.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace spool::storage {
namespace {

constexpr char kFileName[] = "spool-starts";
constexpr char kMagic[8] = {'S', 'P', 'S', 'T', 'A', 'R', 'T', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kBootIdOffset = 16;
constexpr size_t kBootIdBytes = 48;
constexpr size_t kSlotBytes = 16;
// More slots than any runtime uses (workers and claims ahead are bounded
// in the config); a larger count in a header means damage.
constexpr uint32_t kMaxSlots = 1u << 22;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

// Never 0, so that an empty slot never checks.
uint32_t Check(TaskId id, uint32_t attempt) {
  uint64_t h = (id ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
  h ^= attempt + 0x94d049bb133111ebull + (h << 6) + (h >> 2);
  uint32_t check = static_cast<uint32_t>(h ^ (h >> 32));
  return check == 0 ? 1 : check;
}

uint64_t* IdWord(char* slot) { return reinterpret_cast<uint64_t*>(slot); }
uint64_t* TailWord(char* slot) { return reinterpret_cast<uint64_t*>(slot + 8); }

}  // namespace

std::string CurrentBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.size() < kBootIdBytes ? id : id.substr(0, kBootIdBytes - 1);
}

StartLog::~StartLog() {
  Unmap();
  if (fd_ >= 0) ::close(fd_);
}

void StartLog::Unmap() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
  base_ = nullptr;
  mapped_ = 0;
}

Status StartLog::Map(size_t bytes) {
  Unmap();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return Errno("mapping the start log", path_);
  base_ = static_cast<char*>(p);
  mapped_ = bytes;
  return Status::OK();
}

Status StartLog::Open(const std::string& dir, std::unique_ptr<StartLog>* log) {
  std::unique_ptr<StartLog> result(new StartLog());
  result->path_ = dir + "/" + kFileName;
  result->fd_ =
      ::open(result->path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (result->fd_ < 0) return Errno("opening the start log", result->path_);
  struct stat st;
  if (::fstat(result->fd_, &st) != 0) {
    return Errno("reading the size of", result->path_);
  }
  std::string boot = CurrentBootId();
  auto& why = result->why_untrusted_;
  if (boot.empty()) {
    why =
        "this system has no boot id to tell a restart of the process from "
        "one of the machine";
  } else if (st.st_size < static_cast<off_t>(kHeaderBytes)) {
    why = st.st_size == 0 ? "there is no start log from a previous run"
                          : "the start log is truncated";
  } else {
    Status s = result->Map(static_cast<size_t>(st.st_size));
    if (!s.ok()) return s;
    const char* base = result->base_;
    uint32_t version = 0;
    uint32_t slots = 0;
    std::memcpy(&version, base + 8, 4);
    std::memcpy(&slots, base + 12, 4);
    std::string written(base + kBootIdOffset,
                        strnlen(base + kBootIdOffset, kBootIdBytes));
    if (std::memcmp(base, kMagic, sizeof(kMagic)) != 0 || version != kVersion ||
        slots > kMaxSlots ||
        static_cast<size_t>(st.st_size) < kHeaderBytes + slots * kSlotBytes) {
      why = "the start log is not whole (its header is damaged or missing)";
    } else if (written != boot) {
      why = "the machine restarted since the start log was written (boot " +
            written + ", now " + boot + "): it may have lost its last records";
    } else {
      result->previous_trusted_ = true;
      for (uint32_t i = 0; i < slots; ++i) {
        char* slot = result->base_ + kHeaderBytes + i * kSlotBytes;
        uint64_t id = *IdWord(slot);
        uint64_t tail = *TailWord(slot);
        uint32_t attempt = static_cast<uint32_t>(tail);
        uint32_t check = static_cast<uint32_t>(tail >> 32);
        if (check != 0 && check == Check(id, attempt)) {
          result->previous_.insert({id, attempt});
        }
      }
    }
  }
  *log = std::move(result);
  return Status::OK();
}

bool StartLog::PreviouslyStarted(TaskId id, uint32_t attempt) const {
  return previous_.count({id, attempt}) != 0;
}

Status StartLog::Reset(uint32_t slots) {
  if (slots > kMaxSlots) {
    return Status::InvalidArgument("the start log holds at most " +
                                   std::to_string(kMaxSlots) + " slots");
  }
  previous_.clear();
  previous_trusted_ = false;
  size_t bytes = kHeaderBytes + size_t{slots} * kSlotBytes;
  // The header goes invalid first: a crash in the middle leaves a log the
  // next open does not trust, never one that claims empty slots.
  if (base_ != nullptr && mapped_ >= sizeof(kMagic)) {
    std::memset(base_, 0, sizeof(kMagic));
  }
  if (::ftruncate(fd_, 0) != 0 ||
      ::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    return Errno("sizing the start log", path_);
  }
  Status s = Map(bytes);
  if (!s.ok()) return s;
  slots_ = slots;
  std::memcpy(base_ + 8, &kVersion, 4);
  std::memcpy(base_ + 12, &slots, 4);
  std::string boot = CurrentBootId();
  std::memcpy(base_ + kBootIdOffset, boot.data(), boot.size());
  std::memcpy(base_, kMagic, sizeof(kMagic));
  return Status::OK();
}

void StartLog::Record(uint32_t slot, TaskId id, uint32_t attempt) {
  char* p = base_ + kHeaderBytes + size_t{slot} * kSlotBytes;
  // The id first, then attempt and check in one word: a kill between the
  // two leaves a slot that does not check, as an attempt that never began.
  __atomic_store_n(TailWord(p), uint64_t{0}, __ATOMIC_RELAXED);
  __atomic_store_n(IdWord(p), id, __ATOMIC_RELAXED);
  uint64_t tail = (uint64_t{Check(id, attempt)} << 32) | attempt;
  __atomic_store_n(TailWord(p), tail, __ATOMIC_RELEASE);
}

void StartLog::Clear(uint32_t slot) {
  char* p = base_ + kHeaderBytes + size_t{slot} * kSlotBytes;
  __atomic_store_n(TailWord(p), uint64_t{0}, __ATOMIC_RELEASE);
}

}  // namespace spool::storage
