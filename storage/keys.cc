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

std::string TaskKey(TaskId id) {
  std::string key;
  key.reserve(8);
  PutBigEndian64(&key, id);
  return key;
}

bool DecodeTaskKey(std::string_view key, TaskId* id) {
  if (key.size() != 8) return false;
  *id = GetBigEndian64(key.data());
  return true;
}

std::string EncodeReadyKey(const ReadyKey& key) {
  std::string out;
  out.reserve(12);
  PutBigEndian32(&out, EncodePriority(key.priority));
  PutBigEndian64(&out, key.sequence);
  return out;
}

bool DecodeReadyKey(std::string_view key, ReadyKey* out) {
  if (key.size() != 12) return false;
  out->priority = DecodePriority(GetBigEndian32(key.data()));
  out->sequence = GetBigEndian64(key.data() + 4);
  return true;
}

std::string EncodeScheduledKey(const ScheduledKey& key) {
  std::string out;
  out.reserve(16);
  PutBigEndian64(&out, EncodeTime(key.due_us));
  PutBigEndian64(&out, key.sequence);
  return out;
}

bool DecodeScheduledKey(std::string_view key, ScheduledKey* out) {
  if (key.size() != 16) return false;
  out->due_us = DecodeTime(GetBigEndian64(key.data()));
  out->sequence = GetBigEndian64(key.data() + 8);
  return true;
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
  out.reserve(16 + value.type.size() + value.group.size());
  PutBigEndian64(&out, value.id);
  PutBigEndian32(&out, EncodePriority(value.priority));
  PutKeyString(&out, value.type);
  PutKeyString(&out, value.group);
  return out;
}

bool DecodeQueueValue(std::string_view value, QueueValue* out) {
  if (value.size() < 12) return false;
  out->id = GetBigEndian64(value.data());
  out->priority = DecodePriority(GetBigEndian32(value.data() + 8));
  value.remove_prefix(12);
  return GetKeyString(&value, &out->type) &&
         GetKeyString(&value, &out->group) && value.empty();
}

std::string StatusIndexKey(TaskStatus status, TaskId id) {
  std::string key = StatusIndexPrefix(status);
  PutBigEndian64(&key, id);
  return key;
}

std::string StatusIndexPrefix(TaskStatus status) {
  return std::string(1, static_cast<char>(status));
}

bool DecodeStatusIndexKey(std::string_view key, TaskStatus* status,
                          TaskId* id) {
  if (key.size() != 9) return false;
  *status = static_cast<TaskStatus>(static_cast<uint8_t>(key[0]));
  *id = GetBigEndian64(key.data() + 1);
  return true;
}

std::string TypeIndexKey(std::string_view type, TaskStatus status, TaskId id) {
  std::string key = TypeIndexPrefix(type, status);
  PutBigEndian64(&key, id);
  return key;
}

std::string TypeIndexPrefix(std::string_view type) {
  std::string key;
  PutKeyString(&key, type);
  return key;
}

std::string TypeIndexPrefix(std::string_view type, TaskStatus status) {
  std::string key = TypeIndexPrefix(type);
  key.push_back(static_cast<char>(status));
  return key;
}

bool DecodeTrailingId(std::string_view key, TaskId* id) {
  if (key.size() < 8) return false;
  *id = GetBigEndian64(key.data() + key.size() - 8);
  return true;
}

std::string GroupIndexKey(std::string_view group, TaskId id) {
  std::string key = GroupIndexPrefix(group);
  PutBigEndian64(&key, id);
  return key;
}

std::string GroupIndexPrefix(std::string_view group) {
  std::string key;
  PutKeyString(&key, group);
  return key;
}

std::string DedupIndexKey(std::string_view dedup_key) {
  return std::string(dedup_key);
}

std::string WaitingIndexKey(TaskId dependency, TaskId waiter) {
  std::string key = WaitingIndexPrefix(dependency);
  PutBigEndian64(&key, waiter);
  return key;
}

std::string WaitingIndexPrefix(TaskId dependency) {
  std::string key;
  PutBigEndian64(&key, dependency);
  return key;
}

std::string TypeCountKey(std::string_view type, TaskStatus status) {
  std::string key(kTypeCountPrefix);
  PutKeyString(&key, type);
  key.push_back(static_cast<char>(status));
  return key;
}

bool DecodeTypeCountKey(std::string_view key, std::string_view* type,
                        TaskStatus* status) {
  if (key.substr(0, kTypeCountPrefix.size()) != kTypeCountPrefix) return false;
  key.remove_prefix(kTypeCountPrefix.size());
  if (!GetKeyString(&key, type) || key.size() != 1) return false;
  *status = static_cast<TaskStatus>(static_cast<uint8_t>(key[0]));
  return static_cast<size_t>(*status) < kTaskStatusCount;
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

}  // namespace spool::storage
