#include "storage/keys.h"

namespace spool::storage {

void PutBigEndian64(std::string* dst, uint64_t value) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  dst->append(buf, sizeof(buf));
}

void PutBigEndian32(std::string* dst, uint32_t value) {
  char buf[4];
  for (int i = 3; i >= 0; --i) {
    buf[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  dst->append(buf, sizeof(buf));
}

uint64_t GetBigEndian64(const char* p) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value = (value << 8) | static_cast<uint8_t>(p[i]);
  }
  return value;
}

uint32_t GetBigEndian32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value = (value << 8) | static_cast<uint8_t>(p[i]);
  }
  return value;
}

uint32_t EncodePriority(int32_t priority) {
  return ~(static_cast<uint32_t>(priority) ^ 0x80000000u);
}

int32_t DecodePriority(uint32_t encoded) {
  return static_cast<int32_t>(~encoded ^ 0x80000000u);
}

uint64_t EncodeTime(int64_t micros) {
  return static_cast<uint64_t>(micros) ^ (uint64_t{1} << 63);
}

int64_t DecodeTime(uint64_t encoded) {
  return static_cast<int64_t>(encoded ^ (uint64_t{1} << 63));
}

std::string TaskPrefix(TaskId id) {
  std::string key;
  key.reserve(13);
  PutBigEndian64(&key, id);
  return key;
}

std::string SpecKey(TaskId id) {
  std::string key = TaskPrefix(id);
  key.push_back(static_cast<char>(TaskValueKind::kSpec));
  return key;
}

std::string StateKey(TaskId id) {
  std::string key = TaskPrefix(id);
  key.push_back(static_cast<char>(TaskValueKind::kState));
  return key;
}

std::string FailureKey(TaskId id, uint32_t number) {
  std::string key = TaskPrefix(id);
  key.push_back(static_cast<char>(TaskValueKind::kFailure));
  PutBigEndian32(&key, number);
  return key;
}

bool DecodeTaskKey(std::string_view key, TaskId* id, TaskValueKind* kind,
                   uint32_t* number) {
  if (key.size() < 9) return false;
  *id = GetBigEndian64(key.data());
  auto k = static_cast<TaskValueKind>(static_cast<uint8_t>(key[8]));
  switch (k) {
    case TaskValueKind::kSpec:
    case TaskValueKind::kState:
      if (key.size() != 9) return false;
      *number = 0;
      break;
    case TaskValueKind::kFailure:
      if (key.size() != 13) return false;
      *number = GetBigEndian32(key.data() + 9);
      break;
    default:
      return false;
  }
  *kind = k;
  return true;
}

std::string TaskValueName(std::string_view key) {
  TaskId id = 0;
  TaskValueKind kind;
  uint32_t number = 0;
  if (!DecodeTaskKey(key, &id, &kind, &number)) return "a malformed task key";
  std::string name = "task " + std::to_string(id) + "'s ";
  switch (kind) {
    case TaskValueKind::kSpec:
      return name + "spec";
    case TaskValueKind::kState:
      return name + "state";
    case TaskValueKind::kFailure:
      return name + "failure entry " + std::to_string(number);
  }
  return name + "value";
}

void PutKeyString(std::string* dst, std::string_view value) {
  size_t n = value.size() > kMaxKeyString ? kMaxKeyString : value.size();
  dst->push_back(static_cast<char>((n >> 8) & 0xff));
  dst->push_back(static_cast<char>(n & 0xff));
  dst->append(value.data(), n);
}

bool GetKeyString(std::string_view* input, std::string_view* value) {
  if (input->size() < 2) return false;
  size_t n = (static_cast<size_t>(static_cast<uint8_t>((*input)[0])) << 8) |
             static_cast<uint8_t>((*input)[1]);
  if (input->size() < 2 + n) return false;
  *value = input->substr(2, n);
  input->remove_prefix(2 + n);
  return true;
}

std::string EncodeQueueValue(const QueueValue& value) {
  std::string out;
  out.reserve(22 + value.group.size());
  PutBigEndian32(&out, EncodePriority(value.priority));
  PutBigEndian64(&out, value.sequence);
  PutBigEndian64(&out, EncodeTime(value.due_us));
  PutKeyString(&out, value.group);
  return out;
}

bool DecodeQueueValue(std::string_view value, QueueValue* out) {
  if (value.size() < 20) return false;
  out->priority = DecodePriority(GetBigEndian32(value.data()));
  out->sequence = GetBigEndian64(value.data() + 4);
  out->due_us = DecodeTime(GetBigEndian64(value.data() + 12));
  value.remove_prefix(20);
  return GetKeyString(&value, &out->group) && value.empty();
}

namespace {

std::string IndexPrefix(IndexKind kind) {
  return std::string(1, static_cast<char>(kind));
}

}  // namespace

std::string StatusIndexKey(TaskStatus status, std::string_view type,
                           TaskId id) {
  std::string key = StatusIndexPrefix(status, type);
  PutBigEndian64(&key, id);
  return key;
}

std::string StatusIndexPrefix(TaskStatus status) {
  std::string key = IndexPrefix(IndexKind::kStatus);
  key.push_back(static_cast<char>(status));
  return key;
}

std::string StatusIndexPrefix(TaskStatus status, std::string_view type) {
  std::string key = StatusIndexPrefix(status);
  PutKeyString(&key, type);
  return key;
}

bool DecodeStatusIndexKey(std::string_view key, TaskStatus* status,
                          std::string_view* type, TaskId* id) {
  if (key.size() < 2 + 2 + 8 ||
      key[0] != static_cast<char>(IndexKind::kStatus)) {
    return false;
  }
  *status = static_cast<TaskStatus>(static_cast<uint8_t>(key[1]));
  std::string_view rest = key.substr(2);
  if (!GetKeyString(&rest, type) || rest.size() != 8) return false;
  *id = GetBigEndian64(rest.data());
  return static_cast<size_t>(*status) < kTaskStatusCount;
}

bool DecodeTrailingId(std::string_view key, TaskId* id) {
  if (key.size() < 9) return false;
  *id = GetBigEndian64(key.data() + key.size() - 8);
  return true;
}

std::string TypeIndexKey(std::string_view type, TaskId id) {
  std::string key = TypeIndexPrefix(type);
  PutBigEndian64(&key, id);
  return key;
}

std::string TypeIndexPrefix(std::string_view type) {
  std::string key = IndexPrefix(IndexKind::kType);
  PutKeyString(&key, type);
  return key;
}

std::string GroupIndexKey(std::string_view group, TaskId id) {
  std::string key = GroupIndexPrefix(group);
  PutBigEndian64(&key, id);
  return key;
}

std::string GroupIndexPrefix(std::string_view group) {
  std::string key = IndexPrefix(IndexKind::kGroup);
  PutKeyString(&key, group);
  return key;
}

std::string DedupIndexKey(std::string_view dedup_key) {
  return IndexPrefix(IndexKind::kDedup) + std::string(dedup_key);
}

std::string WaitingIndexKey(TaskId dependency, TaskId waiter) {
  std::string key = WaitingIndexPrefix(dependency);
  PutBigEndian64(&key, waiter);
  return key;
}

std::string WaitingIndexPrefix(TaskId dependency) {
  std::string key = IndexPrefix(IndexKind::kWaiting);
  PutBigEndian64(&key, dependency);
  return key;
}

std::string DueIndexKey(int64_t due_us, uint64_t sequence) {
  std::string key = DueIndexPrefix();
  PutBigEndian64(&key, EncodeTime(due_us));
  PutBigEndian64(&key, sequence);
  return key;
}

std::string DueIndexPrefix() { return IndexPrefix(IndexKind::kDue); }

std::string IdValue(TaskId id) {
  std::string value;
  PutBigEndian64(&value, id);
  return value;
}

bool DecodeIdValue(std::string_view value, TaskId* id) {
  if (value.size() != 8) return false;
  *id = GetBigEndian64(value.data());
  return true;
}

std::string TypeCountKey(std::string_view type) {
  std::string key(kTypeCountPrefix);
  PutKeyString(&key, type);
  return key;
}

bool DecodeTypeCountKey(std::string_view key, std::string_view* type) {
  if (key.substr(0, kTypeCountPrefix.size()) != kTypeCountPrefix) return false;
  key.remove_prefix(kTypeCountPrefix.size());
  return GetKeyString(&key, type) && key.empty();
}

void PutCounts(std::string* dst, const StatusCountArray& counts) {
  for (uint64_t count : counts) PutBigEndian64(dst, count);
}

bool GetCounts(std::string_view* input, StatusCountArray* counts) {
  if (input->size() < 8 * kTaskStatusCount) return false;
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    (*counts)[i] = GetBigEndian64(input->data() + 8 * i);
  }
  input->remove_prefix(8 * kTaskStatusCount);
  return true;
}

std::string PrefixSuccessor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    auto last = static_cast<uint8_t>(out.back());
    if (last != 0xff) {
      out.back() = static_cast<char>(last + 1);
      return out;
    }
    out.pop_back();
  }
  return out;
}

std::string EncodeEpochs(const std::vector<EpochStart>& epochs) {
  std::string value;
  value.reserve(16 * epochs.size());
  for (const EpochStart& e : epochs) {
    PutBigEndian64(&value, e.epoch);
    PutBigEndian64(&value, e.first_position);
  }
  return value;
}

bool DecodeEpochs(std::string_view value, std::vector<EpochStart>* epochs) {
  epochs->clear();
  if (value.size() % 16 != 0) return false;
  for (size_t at = 0; at < value.size(); at += 16) {
    EpochStart e{GetBigEndian64(value.data() + at),
                 GetBigEndian64(value.data() + at + 8)};
    if (!epochs->empty() && (e.epoch <= epochs->back().epoch ||
                             e.first_position <= epochs->back().first_position))
      return false;
    epochs->push_back(e);
  }
  return true;
}

}  // namespace spool::storage
