// fuzz_keys: the key and index-value codecs of storage/keys.h.
//
// Invariants checked on every input:
//   - each key decoder accepts a key exactly when it has the decoder's length,
//     whatever the bytes, and re-encoding what it decoded gives the key back
//     byte for byte (so every key of that length is canonical);
//   - the order maps are inverses (EncodePriority/DecodePriority,
//     EncodeTime/DecodeTime, big-endian put/get);
//   - byte order is queue order: for two values read from the input,
//     comparing their encoded keys bytewise (as RocksDB does) gives the
//     order the queue needs: ready keys by priority descending then
//     sequence, scheduled keys by due time then sequence, task keys by id.

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "fuzz/fuzz_support.h"
#include "storage/keys.h"

namespace spool::fuzz {
namespace {

using namespace spool::storage;

// -1, 0 or 1, the way RocksDB's bytewise comparator orders two keys.
int Bytewise(std::string_view a, std::string_view b) {
  const int c = a.compare(b);
  return (c > 0) - (c < 0);
}

template <class T>
int Three(const T& a, const T& b) {
  return (b < a) - (a < b);
}

std::string Hex(std::string_view key) { return Printable(key, 64); }

// Every decoder on `key`, which may have any length.
void CheckDecoders(std::string_view key) {
  TaskId id = 0;
  const bool task_ok = DecodeTaskKey(key, &id);
  FUZZ_CHECK(task_ok == (key.size() == 8), "DecodeTaskKey on " + Hex(key));
  if (task_ok) {
    FUZZ_CHECK(TaskKey(id) == key,
               "TaskKey(DecodeTaskKey(k)) != k: " + Hex(key));
    FUZZ_CHECK(GetBigEndian64(key.data()) == id, "task key is not big-endian");
  }

  ReadyKey ready;
  const bool ready_ok = DecodeReadyKey(key, &ready);
  FUZZ_CHECK(ready_ok == (key.size() == 12), "DecodeReadyKey on " + Hex(key));
  if (ready_ok) {
    FUZZ_CHECK(EncodeReadyKey(ready) == key,
               "EncodeReadyKey(DecodeReadyKey(k)) != k: " + Hex(key));
  }

  ScheduledKey scheduled;
  const bool scheduled_ok = DecodeScheduledKey(key, &scheduled);
  FUZZ_CHECK(scheduled_ok == (key.size() == 16),
             "DecodeScheduledKey on " + Hex(key));
  if (scheduled_ok) {
    FUZZ_CHECK(EncodeScheduledKey(scheduled) == key,
               "EncodeScheduledKey(DecodeScheduledKey(k)) != k: " + Hex(key));
  }

  // A queue value is 12 fixed bytes and two length-prefixed strings; any
  // value it accepts re-encodes to itself.
  QueueValue value;
  if (DecodeQueueValue(key, &value)) {
    FUZZ_CHECK(key.size() == 16 + value.type.size() + value.group.size(),
               "DecodeQueueValue accepted trailing bytes: " + Hex(key));
    FUZZ_CHECK(EncodeQueueValue(value) == key,
               "EncodeQueueValue(DecodeQueueValue(v)) != v: " + Hex(key));
  } else {
    FUZZ_CHECK(
        key.size() != 16 || key[12] != 0 || key[13] != 0 || key[14] != 0 ||
            key[15] != 0,
        "DecodeQueueValue refused 16 bytes with empty strings: " + Hex(key));
  }
}

void CheckScalars(uint64_t u64, uint32_t u32) {
  const auto priority = static_cast<int32_t>(u32);
  FUZZ_CHECK(DecodePriority(EncodePriority(priority)) == priority,
             "priority " + std::to_string(priority));
  FUZZ_CHECK(EncodePriority(DecodePriority(u32)) == u32,
             "encoded priority " + std::to_string(u32));
  const auto time = static_cast<int64_t>(u64);
  FUZZ_CHECK(DecodeTime(EncodeTime(time)) == time,
             "time " + std::to_string(time));
  FUZZ_CHECK(EncodeTime(DecodeTime(u64)) == u64,
             "encoded time " + std::to_string(u64));
  std::string buffer;
  PutBigEndian64(&buffer, u64);
  PutBigEndian32(&buffer, u32);
  FUZZ_CHECK(buffer.size() == 12 && GetBigEndian64(buffer.data()) == u64 &&
                 GetBigEndian32(buffer.data() + 8) == u32,
             "big-endian put/get");
}

void CheckOrder(ByteReader* in) {
  // Two values of each kind. Half the time the second shares a field with
  // the first, so that ties, where the next field decides, are common.
  const uint8_t ties = in->Byte();
  ReadyKey r1{in->I32(), in->U64()};
  ReadyKey r2{in->I32(), in->U64()};
  if (ties & 1) r2.priority = r1.priority;
  const int ready_order =
      Three(std::make_tuple(-int64_t{r1.priority}, r1.sequence),
            std::make_tuple(-int64_t{r2.priority}, r2.sequence));
  FUZZ_CHECK(
      Bytewise(EncodeReadyKey(r1), EncodeReadyKey(r2)) == ready_order,
      "ready keys out of order: priority " + std::to_string(r1.priority) +
          " seq " + std::to_string(r1.sequence) + " vs priority " +
          std::to_string(r2.priority) + " seq " + std::to_string(r2.sequence));

  ScheduledKey s1{in->I64(), in->U64()};
  ScheduledKey s2{in->I64(), in->U64()};
  if (ties & 2) s2.due_us = s1.due_us;
  const int scheduled_order = Three(std::make_tuple(s1.due_us, s1.sequence),
                                    std::make_tuple(s2.due_us, s2.sequence));
  FUZZ_CHECK(Bytewise(EncodeScheduledKey(s1), EncodeScheduledKey(s2)) ==
                 scheduled_order,
             "scheduled keys out of order: due " + std::to_string(s1.due_us) +
                 " vs " + std::to_string(s2.due_us));

  const TaskId a = in->U64();
  const TaskId b = (ties & 4) ? a + 1 : in->U64();
  FUZZ_CHECK(Bytewise(TaskKey(a), TaskKey(b)) == Three(a, b),
             "task keys out of order: " + std::to_string(a) + " vs " +
                 std::to_string(b));

  ReadyKey decoded;
  FUZZ_CHECK(DecodeReadyKey(EncodeReadyKey(r1), &decoded) &&
                 decoded.priority == r1.priority &&
                 decoded.sequence == r1.sequence,
             "ready key round trip");
  ScheduledKey decoded_s;
  FUZZ_CHECK(DecodeScheduledKey(EncodeScheduledKey(s1), &decoded_s) &&
                 decoded_s.due_us == s1.due_us &&
                 decoded_s.sequence == s1.sequence,
             "scheduled key round trip");
  const std::string type = in->Byte() & 1 ? "email.send" : "";
  const std::string group = in->Byte() & 1 ? "tenant-7" : "";
  const QueueValue original{a, r2.priority, type, group};
  QueueValue decoded_v;
  FUZZ_CHECK(DecodeQueueValue(EncodeQueueValue(original), &decoded_v) &&
                 decoded_v.id == a && decoded_v.priority == r2.priority &&
                 decoded_v.type == type && decoded_v.group == group,
             "queue value round trip");
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  // Every length from 0 to 17, so each decoder sees its own length and its
  // neighbours whatever the input's size.
  for (size_t n = 0; n <= 17 && n <= size; ++n)
    CheckDecoders(whole.substr(0, n));
  CheckDecoders(whole);
  ByteReader scalars(data, size);
  CheckScalars(scalars.U64(), scalars.U32());
  ByteReader order(data, size);
  CheckOrder(&order);
  return 0;
}
