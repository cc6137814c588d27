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

std::string EncodeScheduledValue(TaskId id, int32_t priority) {
  std::string out;
  out.reserve(12);
  PutBigEndian64(&out, id);
  PutBigEndian32(&out, EncodePriority(priority));
  return out;
}

bool DecodeScheduledValue(std::string_view value, TaskId* id,
                          int32_t* priority) {
  if (value.size() != 12) return false;
  *id = GetBigEndian64(value.data());
  *priority = DecodePriority(GetBigEndian32(value.data() + 8));
  return true;
}

}  // namespace spool::storage
