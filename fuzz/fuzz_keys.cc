// fuzz_keys: the key and index-value codecs of storage/keys.h.
//
// Invariants checked on every input:
//   - each decoder (DecodeTaskKey, DecodeStatusIndexKey, DecodeTrailingId,
//     DecodeIdValue, DecodeQueueValue, GetKeyString, DecodeTypeCountKey,
//     GetCounts) accepts exactly the bytes of its format, whatever they are
//     (checked against a reference written from the format's description),
//     and re-encoding what it decoded gives the bytes back (so every
//     accepted key is canonical); what it decodes reads the fields where the
//     format puts them, the views it returns point into the input, and a
//     reader that fails consumes nothing;
//   - TaskValueName names the task and value of a well-formed key, and says
//     "a malformed task key" of anything else;
//   - PrefixSuccessor is the smallest string above every string with the
//     prefix;
//   - the order maps are inverses (EncodePriority/DecodePriority,
//     EncodeTime/DecodeTime, big-endian put/get);
//   - byte order is the order the store scans in: for two values read from
//     the input, comparing their encoded keys bytewise (as RocksDB does)
//     gives a task's values by (id, kind, failure number), status entries by
//     (status, type, id) with the type compared in its length-prefixed form
//     (so the entries of one status and type by id), group entries of one
//     group and waiting entries of one dependency by id, and due entries by
//     (due time, sequence);
//   - StatusIndexPrefix(status) matches the status entries of that status
//     and StatusIndexPrefix(status, type) those of that status and type, as
//     a prefix and as the scan range [prefix, PrefixSuccessor(prefix)), and
//     no other, not even those of a type that is a prefix of this one or has
//     it as a prefix; the same for group and dependency prefixes, and a type
//     count key is the prefix of no other type's; every index key starts
//     with its IndexKind byte;
//   - DecodeStatusIndexKey refuses a status entry's key with another kind
//     byte, a status of kTaskStatusCount or more, or a type length that runs
//     past the end or leaves other than the 8 bytes of the id;
//   - QueueValue, type count keys and PutCounts/GetCounts round-trip.
//
// CheckOrder reads the input, front to back, as: a byte of tie flags; two
// task keys (id 8, kind 1, number 4 bytes each); two status entries
// (status 1, type: length byte and text, id 8); two group entries (group:
// length byte and text, id 8); two waiting entries (dependency 8, waiter
// 8); two due entries (due 8, sequence 8); a queue value (priority 4,
// sequence 8, due 8, group: length byte and text); a count per status (8
// bytes each). The type count keys are those of the status entries' types.
// Bytes past the end read as zeros (ByteReader).

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

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Whether `inner` lies inside `outer`'s bytes (an empty view anywhere).
bool Within(std::string_view inner, std::string_view outer) {
  if (inner.empty()) return true;
  return inner.data() >= outer.data() &&
         inner.data() + inner.size() <= outer.data() + outer.size();
}

std::string Hex(std::string_view key) { return Printable(key, 64); }

// Whether a scan of [prefix, PrefixSuccessor(prefix)), as the store does
// one, sees `key`.
bool InScanRange(std::string_view key, std::string_view prefix) {
  const std::string end = PrefixSuccessor(prefix);
  return key >= prefix && (end.empty() || key < end);
}

uint16_t Be16(std::string_view s, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) |
                               static_cast<uint8_t>(s[at + 1]));
}

// The key of one of a task's values, by kind.
std::string TaskValueKey(TaskId id, TaskValueKind kind, uint32_t number) {
  switch (kind) {
    case TaskValueKind::kSpec:
      return SpecKey(id);
    case TaskValueKind::kState:
      return StateKey(id);
    case TaskValueKind::kFailure:
      return FailureKey(id, number);
  }
  return "";
}

void CheckTaskKey(std::string_view key) {
  TaskId id = 0;
  TaskValueKind kind = TaskValueKind::kSpec;
  uint32_t number = 0;
  const bool ok = DecodeTaskKey(key, &id, &kind, &number);
  const uint8_t kind_byte = key.size() > 8 ? static_cast<uint8_t>(key[8]) : 0;
  const bool expected = (key.size() == 9 && kind_byte <= 1) ||
                        (key.size() == 13 && kind_byte == 2);
  FUZZ_CHECK(ok == expected, "DecodeTaskKey on " + Hex(key));
  const std::string name = TaskValueName(key);
  if (!ok) {
    FUZZ_CHECK(name == "a malformed task key",
               "TaskValueName of malformed " + Hex(key) + ": " + name);
    return;
  }
  FUZZ_CHECK(id == GetBigEndian64(key.data()), "task key id is not big-endian");
  FUZZ_CHECK(static_cast<uint8_t>(kind) == kind_byte, "task key kind");
  FUZZ_CHECK(number == (kind == TaskValueKind::kFailure
                            ? GetBigEndian32(key.data() + 9)
                            : 0),
             "failure number");
  FUZZ_CHECK(TaskValueKey(id, kind, number) == key,
             "the key of DecodeTaskKey(k) != k: " + Hex(key));
  FUZZ_CHECK(StartsWith(key, TaskPrefix(id)) && TaskPrefix(id).size() == 8,
             "TaskPrefix");
  const std::string expected_name =
      "task " + std::to_string(id) + "'s " +
      (kind == TaskValueKind::kSpec ? std::string("spec")
       : kind == TaskValueKind::kState
           ? std::string("state")
           : "failure entry " + std::to_string(number));
  FUZZ_CHECK(name == expected_name,
             "TaskValueName: " + name + ", expected " + expected_name);
}

// The reference for DecodeStatusIndexKey: the kind byte, a status below
// kTaskStatusCount, the type (2-byte length and text), then exactly the 8
// bytes of the id.
bool StatusKeyWellFormed(std::string_view key) {
  if (key.size() < 4 || key[0] != static_cast<char>(IndexKind::kStatus) ||
      static_cast<uint8_t>(key[1]) >= kTaskStatusCount) {
    return false;
  }
  return key.size() == 4u + Be16(key, 2) + 8;
}

void CheckStatusKey(std::string_view key) {
  TaskStatus status = TaskStatus::kPending;
  std::string_view type;
  TaskId id = 0;
  const bool ok = DecodeStatusIndexKey(key, &status, &type, &id);
  FUZZ_CHECK(ok == StatusKeyWellFormed(key),
             "DecodeStatusIndexKey on " + Hex(key));
  if (!ok) return;
  const size_t type_length = Be16(key, 2);
  FUZZ_CHECK(static_cast<uint8_t>(status) == static_cast<uint8_t>(key[1]) &&
                 type == key.substr(4, type_length) &&
                 id == GetBigEndian64(key.data() + 4 + type_length),
             "status key fields of " + Hex(key));
  FUZZ_CHECK(
      Within(type, key) && (type.empty() || type.data() == key.data() + 4),
      "the status key's type does not point into it: " + Hex(key));
  FUZZ_CHECK(StatusIndexKey(status, type, id) == key,
             "StatusIndexKey(DecodeStatusIndexKey(k)) != k: " + Hex(key));
  FUZZ_CHECK(
      StatusIndexPrefix(status) == key.substr(0, 2),
      "StatusIndexPrefix(status) is not the key's first 2 bytes: " + Hex(key));
  FUZZ_CHECK(StatusIndexPrefix(status, type) == key.substr(0, key.size() - 8),
             "StatusIndexPrefix(status, type) is not the key without its id: " +
                 Hex(key));
  TaskId trailing = 0;
  FUZZ_CHECK(DecodeTrailingId(key, &trailing) && trailing == id,
             "DecodeTrailingId of a status key");
}

// The reference for DecodeQueueValue: 20 fixed bytes (priority 4,
// sequence 8, due time 8), then the group (2-byte length and text), and
// nothing after it.
bool QueueValueWellFormed(std::string_view v) {
  return v.size() >= 22 && v.size() == 22u + Be16(v, 20);
}

void CheckQueueValue(std::string_view value) {
  QueueValue decoded;
  const bool ok = DecodeQueueValue(value, &decoded);
  FUZZ_CHECK(ok == QueueValueWellFormed(value),
             "DecodeQueueValue on " + Hex(value));
  if (!ok) return;
  FUZZ_CHECK(decoded.group == value.substr(22),
             "the queue value's group: " + Hex(value));
  FUZZ_CHECK(
      Within(decoded.group, value) &&
          (decoded.group.empty() || decoded.group.data() == value.data() + 22),
      "the queue value's group does not point into it");
  FUZZ_CHECK(
      decoded.priority == DecodePriority(GetBigEndian32(value.data())) &&
          decoded.sequence == GetBigEndian64(value.data() + 4) &&
          decoded.due_us == DecodeTime(GetBigEndian64(value.data() + 12)),
      "queue value fields of " + Hex(value));
  FUZZ_CHECK(EncodeQueueValue(decoded) == value,
             "EncodeQueueValue(DecodeQueueValue(v)) != v: " + Hex(value));
}

void CheckKeyString(std::string_view bytes) {
  std::string_view input = bytes;
  std::string_view value;
  const bool ok = GetKeyString(&input, &value);
  const bool expected =
      bytes.size() >= 2 && bytes.size() >= 2u + Be16(bytes, 0);
  FUZZ_CHECK(ok == expected, "GetKeyString on " + Hex(bytes));
  if (!ok) {
    FUZZ_CHECK(input == bytes, "a failed GetKeyString consumed input");
    return;
  }
  const size_t used = 2 + value.size();
  FUZZ_CHECK(value.size() == Be16(bytes, 0) && Within(value, bytes) &&
                 value.data() == bytes.data() + 2 &&
                 input.data() == bytes.data() + used &&
                 input.size() == bytes.size() - used,
             "GetKeyString split " + Hex(bytes));
  std::string again;
  PutKeyString(&again, value);
  FUZZ_CHECK(again == bytes.substr(0, used),
             "PutKeyString(GetKeyString(s)) != s: " + Hex(bytes));
}

// The reference for DecodeTypeCountKey: kTypeCountPrefix, then the type
// (2-byte length and text), and nothing after it.
void CheckTypeCountKey(std::string_view key) {
  std::string_view type;
  const bool ok = DecodeTypeCountKey(key, &type);
  bool expected = false;
  const size_t at = kTypeCountPrefix.size();
  if (StartsWith(key, kTypeCountPrefix)) {
    const std::string_view rest = key.substr(at);
    expected = rest.size() >= 2 && rest.size() == 2u + Be16(rest, 0);
  }
  FUZZ_CHECK(ok == expected, "DecodeTypeCountKey on " + Hex(key));
  if (!ok) return;
  FUZZ_CHECK(type == key.substr(at + 2) && Within(type, key) &&
                 (type.empty() || type.data() == key.data() + at + 2),
             "the type count key's type: " + Hex(key));
  FUZZ_CHECK(TypeCountKey(type) == key,
             "TypeCountKey(DecodeTypeCountKey(k)) != k: " + Hex(key));
}

// The reference for GetCounts: kTaskStatusCount big-endian 64-bit numbers;
// what follows them is left to the caller.
void CheckCounts(std::string_view bytes) {
  constexpr size_t kBytes = 8 * kTaskStatusCount;
  std::string_view input = bytes;
  StatusCountArray counts{};
  const bool ok = GetCounts(&input, &counts);
  FUZZ_CHECK(ok == (bytes.size() >= kBytes), "GetCounts on " + Hex(bytes));
  if (!ok) {
    FUZZ_CHECK(input.data() == bytes.data() && input.size() == bytes.size(),
               "a failed GetCounts consumed input");
    return;
  }
  FUZZ_CHECK(input.data() == bytes.data() + kBytes &&
                 input.size() == bytes.size() - kBytes,
             "GetCounts did not consume exactly its counts: " + Hex(bytes));
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    FUZZ_CHECK(counts[i] == GetBigEndian64(bytes.data() + 8 * i),
               "GetCounts' count " + std::to_string(i) + " of " + Hex(bytes));
  }
  std::string again;
  PutCounts(&again, counts);
  FUZZ_CHECK(again == bytes.substr(0, kBytes),
             "PutCounts(GetCounts(s)) != s: " + Hex(bytes));
}

void CheckPrefixSuccessor(std::string_view prefix) {
  const std::string next = PrefixSuccessor(prefix);
  size_t kept = prefix.size();
  while (kept > 0 && static_cast<uint8_t>(prefix[kept - 1]) == 0xff) --kept;
  if (kept == 0) {
    FUZZ_CHECK(next.empty(), "PrefixSuccessor of all 0xff bytes: " + Hex(next));
    return;
  }
  FUZZ_CHECK(next.size() == kept &&
                 next.compare(0, kept - 1, prefix.data(), kept - 1) == 0 &&
                 static_cast<uint8_t>(next.back()) ==
                     static_cast<uint8_t>(prefix[kept - 1]) + 1,
             "PrefixSuccessor(" + Hex(prefix) + ") = " + Hex(next));
  // Above the prefix and everything it starts, and nothing between.
  FUZZ_CHECK(Bytewise(prefix, next) < 0 &&
                 Bytewise(std::string(prefix) + "\xff\xff\xff", next) < 0,
             "PrefixSuccessor is not above the prefix's keys");
}

// Every decoder on `key`, which may have any length.
void CheckDecoders(std::string_view key) {
  CheckTaskKey(key);
  CheckStatusKey(key);

  TaskId id = 0;
  const bool trailing_ok = DecodeTrailingId(key, &id);
  FUZZ_CHECK(trailing_ok == (key.size() >= 9),
             "DecodeTrailingId on " + Hex(key));
  if (trailing_ok) {
    FUZZ_CHECK(id == GetBigEndian64(key.data() + key.size() - 8),
               "DecodeTrailingId reads the last 8 bytes");
  }

  const bool id_ok = DecodeIdValue(key, &id);
  FUZZ_CHECK(id_ok == (key.size() == 8), "DecodeIdValue on " + Hex(key));
  if (id_ok) {
    FUZZ_CHECK(IdValue(id) == key, "IdValue(DecodeIdValue(v)) != v");
  }

  CheckQueueValue(key);
  CheckKeyString(key);
  CheckTypeCountKey(key);
  CheckCounts(key);
  CheckPrefixSuccessor(key);
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

TaskStatus StatusFrom(uint8_t byte) {
  return static_cast<TaskStatus>(byte % kTaskStatusCount);
}

void CheckIndexKind(std::string_view key, IndexKind kind, const char* what) {
  FUZZ_CHECK(
      !key.empty() && key[0] == static_cast<char>(kind),
      std::string(what) + " key does not start with its kind: " + Hex(key));
}

void CheckOrder(ByteReader* in) {
  // Two values of each kind. With a tie bit set the second shares a field
  // with the first, so that ties, where the next field decides, are common.
  const uint8_t ties = in->Byte();

  // A task's values: by id, then kind, then failure number.
  {
    const TaskId id1 = in->U64();
    const auto kind1 = static_cast<TaskValueKind>(in->Byte() % 3);
    const uint32_t n1 = in->U32();
    TaskId id2 = in->U64();
    const auto kind2 = static_cast<TaskValueKind>(in->Byte() % 3);
    uint32_t n2 = in->U32();
    if (ties & 1) id2 = id1;
    if (ties & 2) n2 = n1 + 1;
    const uint32_t number1 = kind1 == TaskValueKind::kFailure ? n1 : 0;
    const uint32_t number2 = kind2 == TaskValueKind::kFailure ? n2 : 0;
    const std::string k1 = TaskValueKey(id1, kind1, number1);
    const std::string k2 = TaskValueKey(id2, kind2, number2);
    FUZZ_CHECK(
        Bytewise(k1, k2) ==
            Three(std::make_tuple(id1, static_cast<uint8_t>(kind1), number1),
                  std::make_tuple(id2, static_cast<uint8_t>(kind2), number2)),
        "task keys out of order: " + Hex(k1) + " vs " + Hex(k2));
    FUZZ_CHECK(StartsWith(k2, TaskPrefix(id1)) == (id1 == id2),
               "TaskPrefix matches another task's key");
    TaskId id = 0;
    TaskValueKind kind = TaskValueKind::kSpec;
    uint32_t number = 0;
    FUZZ_CHECK(DecodeTaskKey(k1, &id, &kind, &number) && id == id1 &&
                   kind == kind1 && number == number1,
               "task key round trip");
  }

  // Status entries: by status, then type (its length first), then id. A
  // status prefix, and a status and type prefix, match their own keys only.
  {
    const TaskStatus s1 = StatusFrom(in->Byte());
    const std::string t1(in->ShortString());
    const TaskId id1 = in->U64();
    TaskStatus s2 = StatusFrom(in->Byte());
    std::string t2(in->ShortString());
    const TaskId id2 = in->U64();
    if (ties & 4) s2 = s1;
    // 8: the same type; 16: t1 is a prefix of t2; both: t2 a prefix of t1.
    switch (ties & 24) {
      case 8:
        t2 = t1;
        break;
      case 16:
        t2 = t1 + t2;
        break;
      case 24:
        t2 = t1.substr(0, t2.size());
        break;
    }
    const std::string k1 = StatusIndexKey(s1, t1, id1);
    const std::string k2 = StatusIndexKey(s2, t2, id2);
    CheckIndexKind(k1, IndexKind::kStatus, "status");
    CheckStatusKey(k1);
    CheckStatusKey(k2);
    const auto fields = [](TaskStatus s, const std::string& t, TaskId id) {
      return std::make_tuple(s, t.size(), std::string_view(t), id);
    };
    FUZZ_CHECK(
        Bytewise(k1, k2) == Three(fields(s1, t1, id1), fields(s2, t2, id2)),
        "status keys out of order: " + Hex(k1) + " vs " + Hex(k2));
    const bool same_status = s1 == s2;
    const bool same_type = same_status && t1 == t2;
    const std::string sp = StatusIndexPrefix(s1);
    FUZZ_CHECK(StartsWith(k1, sp) && (StartsWith(k2, sp) == same_status),
               "StatusIndexPrefix(" + Hex(sp) + ") vs the key " + Hex(k2));
    FUZZ_CHECK(InScanRange(k1, sp) && (InScanRange(k2, sp) == same_status),
               "the scan range of StatusIndexPrefix(" + Hex(sp) +
                   ") vs the key " + Hex(k2));
    const std::string p1 = StatusIndexPrefix(s1, t1);
    const std::string p2 = StatusIndexPrefix(s2, t2);
    FUZZ_CHECK(StartsWith(k1, p1) && StartsWith(k2, p2),
               "StatusIndexPrefix(status, type) of its own key");
    FUZZ_CHECK(
        (StartsWith(k2, p1) == same_type) && (StartsWith(k1, p2) == same_type),
        "StatusIndexPrefix(" + Hex(t1) + ") vs the key of type " + Hex(t2));
    FUZZ_CHECK(InScanRange(k1, p1) && (InScanRange(k2, p1) == same_type) &&
                   InScanRange(k2, p2) && (InScanRange(k1, p2) == same_type),
               "the scan range of StatusIndexPrefix(" + Hex(t1) +
                   ") vs the key of type " + Hex(t2));
    TaskStatus status = TaskStatus::kPending;
    std::string_view type;
    TaskId id = 0;
    FUZZ_CHECK(DecodeStatusIndexKey(k1, &status, &type, &id) && status == s1 &&
                   type == t1 && id == id1,
               "status key round trip");
    // Malformed variants of k1, each refused.
    const auto refused = [&](const std::string& bad, const char* what) {
      FUZZ_CHECK(!DecodeStatusIndexKey(bad, &status, &type, &id),
                 std::string("DecodeStatusIndexKey accepts ") + what + ": " +
                     Hex(bad));
    };
    for (const IndexKind other :
         {IndexKind::kType, IndexKind::kGroup, IndexKind::kDedup,
          IndexKind::kWaiting, IndexKind::kDue}) {
      std::string bad = k1;
      bad[0] = static_cast<char>(other);
      refused(bad, "another kind byte");
    }
    for (const size_t bad_status : {kTaskStatusCount, size_t{0xff}}) {
      std::string bad = k1;
      bad[1] = static_cast<char>(bad_status);
      refused(bad, "a status out of range");
    }
    // Any other type length leaves other than 8 bytes for the id, or runs
    // past the end.
    for (const size_t length : {t1.size() - 1, t1.size() + 1, t1.size() + 8,
                                t1.size() + 9, size_t{0xffff}}) {
      if (length > 0xffff) continue;  // t1.size() - 1 of an empty type.
      std::string bad = k1;
      bad[2] = static_cast<char>(length >> 8);
      bad[3] = static_cast<char>(length & 0xff);
      refused(bad, "a wrong type length");
    }
    refused(k1.substr(0, k1.size() - 1), "a 7-byte id");
    refused(k1 + '\0', "a 9-byte id");
    // Type count keys: one per type, none the prefix of another's.
    const std::string c1 = TypeCountKey(t1);
    const std::string c2 = TypeCountKey(t2);
    CheckTypeCountKey(c1);
    FUZZ_CHECK(StartsWith(c1, kTypeCountPrefix), "type count key prefix");
    FUZZ_CHECK((StartsWith(c2, c1) == (t1 == t2)) &&
                   (StartsWith(c1, c2) == (t1 == t2)),
               "the type count key of " + Hex(t1) + " vs that of " + Hex(t2));
    FUZZ_CHECK(DecodeTypeCountKey(c1, &type) && type == t1,
               "type count key round trip");
  }

  // Type entries: a type's prefix matches its keys only; by id within.
  {
    const std::string t1(in->ShortString());
    const TaskId id1 = in->U64();
    std::string t2(in->ShortString());
    const TaskId id2 = in->U64();
    if (ties & 64) t2 = t1;
    const std::string k1 = TypeIndexKey(t1, id1);
    const std::string k2 = TypeIndexKey(t2, id2);
    CheckIndexKind(k1, IndexKind::kType, "type");
    FUZZ_CHECK(
        StartsWith(k2, TypeIndexPrefix(t1)) == (t1 == t2),
        "TypeIndexPrefix(" + Hex(t1) + ") vs the key of type " + Hex(t2));
    if (t1 == t2) {
      FUZZ_CHECK(Bytewise(k1, k2) == Three(id1, id2),
                 "type keys out of order: " + Hex(k1) + " vs " + Hex(k2));
    }
    TaskId id = 0;
    FUZZ_CHECK(DecodeTrailingId(k1, &id) && id == id1, "type key trailing id");
  }

  // Group entries: a group's prefix matches its keys only; by id within.
  {
    const std::string g1(in->ShortString());
    const TaskId id1 = in->U64();
    std::string g2(in->ShortString());
    const TaskId id2 = in->U64();
    if (ties & 32) g2 = g1;
    const std::string k1 = GroupIndexKey(g1, id1);
    const std::string k2 = GroupIndexKey(g2, id2);
    CheckIndexKind(k1, IndexKind::kGroup, "group");
    FUZZ_CHECK(
        StartsWith(k2, GroupIndexPrefix(g1)) == (g1 == g2),
        "GroupIndexPrefix(" + Hex(g1) + ") vs the key of group " + Hex(g2));
    if (g1 == g2) {
      FUZZ_CHECK(Bytewise(k1, k2) == Three(id1, id2),
                 "group keys out of order: " + Hex(k1) + " vs " + Hex(k2));
    }
    TaskId id = 0;
    FUZZ_CHECK(DecodeTrailingId(k1, &id) && id == id1, "group key's id");
    const std::string dedup = DedupIndexKey(g1);
    CheckIndexKind(dedup, IndexKind::kDedup, "dedup");
    FUZZ_CHECK(dedup.substr(1) == g1, "DedupIndexKey holds the key itself");
  }

  // Waiting entries: by dependency, then waiter.
  {
    const TaskId d1 = in->U64();
    const TaskId w1 = in->U64();
    TaskId d2 = in->U64();
    const TaskId w2 = in->U64();
    if (ties & 64) d2 = d1;
    const std::string k1 = WaitingIndexKey(d1, w1);
    const std::string k2 = WaitingIndexKey(d2, w2);
    CheckIndexKind(k1, IndexKind::kWaiting, "waiting");
    FUZZ_CHECK(Bytewise(k1, k2) ==
                   Three(std::make_tuple(d1, w1), std::make_tuple(d2, w2)),
               "waiting keys out of order: " + Hex(k1) + " vs " + Hex(k2));
    FUZZ_CHECK(StartsWith(k2, WaitingIndexPrefix(d1)) == (d1 == d2),
               "WaitingIndexPrefix matches another dependency");
    TaskId id = 0;
    FUZZ_CHECK(DecodeTrailingId(k1, &id) && id == w1, "waiting key's id");
  }

  // Due entries: by due time (signed), then sequence.
  {
    const int64_t due1 = in->I64();
    const uint64_t seq1 = in->U64();
    int64_t due2 = in->I64();
    const uint64_t seq2 = in->U64();
    if (ties & 128) due2 = due1;
    const std::string k1 = DueIndexKey(due1, seq1);
    const std::string k2 = DueIndexKey(due2, seq2);
    CheckIndexKind(k1, IndexKind::kDue, "due");
    FUZZ_CHECK(StartsWith(k1, DueIndexPrefix()) && k1.size() == 17 &&
                   DecodeTime(GetBigEndian64(k1.data() + 1)) == due1 &&
                   GetBigEndian64(k1.data() + 9) == seq1,
               "due key layout: " + Hex(k1));
    FUZZ_CHECK(Bytewise(k1, k2) == Three(std::make_tuple(due1, seq1),
                                         std::make_tuple(due2, seq2)),
               "due keys out of order: due " + std::to_string(due1) + " vs " +
                   std::to_string(due2));
  }

  // A queue value round-trips, and counts do.
  {
    const int32_t priority = in->I32();
    const uint64_t sequence = in->U64();
    const int64_t due_us = in->I64();
    const std::string group(in->ShortString());
    const QueueValue original{priority, sequence, due_us, group};
    const std::string encoded = EncodeQueueValue(original);
    QueueValue decoded;
    FUZZ_CHECK(DecodeQueueValue(encoded, &decoded) &&
                   decoded.priority == priority &&
                   decoded.sequence == sequence && decoded.due_us == due_us &&
                   decoded.group == group,
               "queue value round trip: " + Hex(encoded));

    StatusCountArray counts{};
    for (uint64_t& count : counts) count = in->U64();
    // PutCounts appends.
    std::string buffer = "x";
    PutCounts(&buffer, counts);
    FUZZ_CHECK(buffer.size() == 1 + 8 * kTaskStatusCount && buffer[0] == 'x',
               "PutCounts does not append its counts: " + Hex(buffer));
    std::string_view input(buffer);
    input.remove_prefix(1);
    StatusCountArray back{};
    FUZZ_CHECK(GetCounts(&input, &back) && back == counts && input.empty(),
               "counts round trip: " + Hex(buffer));
  }
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  // Every length up to one past the counts (the longest fixed format), so
  // each decoder sees its own length and its neighbours whatever the
  // input's size.
  constexpr size_t kLongest = 8 * spool::kTaskStatusCount + 1;
  for (size_t n = 0; n <= kLongest && n <= size; ++n) {
    CheckDecoders(whole.substr(0, n));
  }
  CheckDecoders(whole);
  ByteReader scalars(data, size);
  CheckScalars(scalars.U64(), scalars.U32());
  ByteReader order(data, size);
  CheckOrder(&order);
  return 0;
}
