#include "storage/keys.h"

#include <algorithm>
#include <climits>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace spool::storage {
namespace {

TEST(KeysTest, BigEndianHelpersRoundTrip) {
  std::string out;
  PutBigEndian64(&out, 0x0102030405060708ull);
  PutBigEndian32(&out, 0xA1B2C3D4u);
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out.substr(0, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08"));
  EXPECT_EQ(GetBigEndian64(out.data()), 0x0102030405060708ull);
  EXPECT_EQ(GetBigEndian32(out.data() + 8), 0xA1B2C3D4u);
}

TEST(KeysTest, PriorityEncodingSortsHigherPriorityFirst) {
  std::vector<int32_t> priorities = {INT32_MIN, -100, -1, 0, 1, 7, INT32_MAX};
  for (size_t i = 0; i + 1 < priorities.size(); ++i) {
    EXPECT_GT(EncodePriority(priorities[i]), EncodePriority(priorities[i + 1]))
        << priorities[i] << " vs " << priorities[i + 1];
  }
  for (int32_t p : priorities) EXPECT_EQ(DecodePriority(EncodePriority(p)), p);
}

TEST(KeysTest, TimeEncodingSortsNegativeTimesFirst) {
  std::vector<int64_t> times = {INT64_MIN,        -5,       0, 1,
                                1700000000000000, INT64_MAX};
  for (size_t i = 0; i + 1 < times.size(); ++i) {
    EXPECT_LT(EncodeTime(times[i]), EncodeTime(times[i + 1])) << times[i];
  }
  for (int64_t t : times) EXPECT_EQ(DecodeTime(EncodeTime(t)), t);
}

// The due index replaces the old `scheduled` family: (due time, sequence),
// earliest first, negative times included.
TEST(KeysTest, DueKeysOrderByTimeThenSequenceIncludingNegative) {
  std::vector<int64_t> times = {INT64_MIN,        -5,       0, 1,
                                1700000000000000, INT64_MAX};
  for (size_t i = 0; i + 1 < times.size(); ++i) {
    EXPECT_LT(DueIndexKey(times[i], 9), DueIndexKey(times[i + 1], 0))
        << times[i];
  }
  EXPECT_LT(DueIndexKey(5, 1), DueIndexKey(5, 2));
  EXPECT_LT(DueIndexKey(5, 255), DueIndexKey(5, 256));
  for (int64_t t : times) {
    std::string key = DueIndexKey(t, 42);
    EXPECT_EQ(key.size(), 17u);
    EXPECT_EQ(key.substr(0, DueIndexPrefix().size()), DueIndexPrefix());
    EXPECT_EQ(DecodeTime(GetBigEndian64(key.data() + 1)), t);
    EXPECT_EQ(GetBigEndian64(key.data() + 9), 42u);
  }
}

TEST(KeysTest, QueueValuesRoundTrip) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string group(rng() % 40, static_cast<char>(rng() % 256));
    QueueValue in;
    in.priority = static_cast<int32_t>(rng());
    in.sequence = rng();
    in.due_us = static_cast<int64_t>(rng());
    in.group = group;
    std::string encoded = EncodeQueueValue(in);
    QueueValue out;
    ASSERT_TRUE(DecodeQueueValue(encoded, &out));
    EXPECT_EQ(out.priority, in.priority);
    EXPECT_EQ(out.sequence, in.sequence);
    EXPECT_EQ(out.due_us, in.due_us);
    EXPECT_EQ(out.group, group);
    EXPECT_EQ(encoded.size(), 22 + group.size());
    // The view points into the encoded value.
    EXPECT_GE(out.group.data(), encoded.data());
    EXPECT_LE(out.group.data() + out.group.size(),
              encoded.data() + encoded.size());
  }
}

TEST(KeysTest, DecodersRejectWrongLengths) {
  TaskId id = 0;
  TaskValueKind kind;
  uint32_t number = 0;
  QueueValue value;
  EXPECT_FALSE(DecodeTaskKey("short", &id, &kind, &number));
  EXPECT_FALSE(DecodeTaskKey("", &id, &kind, &number));
  EXPECT_FALSE(DecodeQueueValue("", &value));
  EXPECT_FALSE(DecodeQueueValue(std::string(19, '\0'), &value));
  std::string encoded = EncodeQueueValue({-3, 77, 5000, "customer-1"});
  ASSERT_TRUE(DecodeQueueValue(encoded, &value));
  EXPECT_EQ(value.priority, -3);
  EXPECT_EQ(value.sequence, 77u);
  EXPECT_EQ(value.due_us, 5000);
  EXPECT_EQ(value.group, "customer-1");
  EXPECT_FALSE(DecodeQueueValue(encoded + "x", &value));
  EXPECT_FALSE(DecodeQueueValue(encoded.substr(0, encoded.size() - 1), &value));
  // An empty group is fine: 20 + 2 bytes.
  std::string bare = EncodeQueueValue({0, 0, 0, ""});
  EXPECT_EQ(bare.size(), 22u);
  ASSERT_TRUE(DecodeQueueValue(bare, &value));
  EXPECT_TRUE(value.group.empty());

  EXPECT_FALSE(DecodeIdValue("1234567", &id));
  EXPECT_FALSE(DecodeIdValue("123456789", &id));
  ASSERT_TRUE(DecodeIdValue(IdValue(0x0102030405060708ull), &id));
  EXPECT_EQ(id, 0x0102030405060708ull);
  EXPECT_FALSE(DecodeTrailingId("12345678", &id));
}

TEST(KeysTest, KeyStringsAreLengthPrefixedSoPrefixesDoNotCollide) {
  const std::string ab_prefix = StatusIndexPrefix(TaskStatus::kPending, "ab");
  std::string a = StatusIndexKey(TaskStatus::kPending, "ab", 1);
  std::string abc = StatusIndexKey(TaskStatus::kPending, "abc", 1);
  EXPECT_NE(abc.substr(0, ab_prefix.size()), ab_prefix);
  EXPECT_EQ(a.substr(0, ab_prefix.size()), ab_prefix);
  std::string g = GroupIndexKey("abc", 1);
  EXPECT_NE(g.substr(0, GroupIndexPrefix("ab").size()), GroupIndexPrefix("ab"));
  EXPECT_EQ(g.substr(0, GroupIndexPrefix("abc").size()),
            GroupIndexPrefix("abc"));
  TaskId id = 0;
  ASSERT_TRUE(
      DecodeTrailingId(StatusIndexKey(TaskStatus::kFailed, "t", 42), &id));
  EXPECT_EQ(id, 42u);
  std::string_view type;
  std::string with_nul("x\0y", 3);
  // `type` views the key, so the key must outlive it.
  const std::string count_key = TypeCountKey(with_nul);
  ASSERT_TRUE(DecodeTypeCountKey(count_key, &type));
  EXPECT_EQ(type, with_nul);
  EXPECT_EQ(count_key.rfind(kTypeCountPrefix, 0), 0u);
  EXPECT_FALSE(DecodeTypeCountKey("count/x", &type));
  EXPECT_FALSE(DecodeTypeCountKey(count_key + "x", &type));
  EXPECT_FALSE(
      DecodeTypeCountKey(count_key.substr(0, count_key.size() - 1), &type));
  // One type's key is not a prefix of a longer type's.
  EXPECT_NE(TypeCountKey("abc").rfind(TypeCountKey("ab"), 0), 0u);
  EXPECT_EQ(PrefixSuccessor("ab"), "ac");
  EXPECT_EQ(PrefixSuccessor(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixSuccessor(std::string("\xff\xff", 2)), "");
  EXPECT_EQ(PrefixSuccessor(""), "");
}

TEST(KeysTest, StatusCountsRoundTrip) {
  StatusCountArray counts{};
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    counts[i] = (uint64_t{1} << (8 * i)) + i;
  }
  counts[kTaskStatusCount - 1] = UINT64_MAX;
  std::string encoded = "head";
  PutCounts(&encoded, counts);
  encoded += "tail";
  EXPECT_EQ(encoded.size(), 8 + 8 * kTaskStatusCount);
  std::string_view input(encoded);
  input.remove_prefix(4);
  StatusCountArray out{};
  ASSERT_TRUE(GetCounts(&input, &out));
  EXPECT_EQ(out, counts);
  EXPECT_EQ(input, "tail");
  // Big-endian, in status order.
  EXPECT_EQ(GetBigEndian64(encoded.data() + 4 + 8), counts[1]);
  std::string_view short_input = std::string_view(encoded).substr(4, 8 * 7);
  EXPECT_FALSE(GetCounts(&short_input, &out));
}

TEST(KeysTest, KeyStringsRoundTripAndRejectTruncation) {
  std::string encoded;
  PutKeyString(&encoded, "alpha");
  PutKeyString(&encoded, "");
  PutKeyString(&encoded, std::string("\0\xff", 2));
  std::string_view input = encoded;
  std::string_view value;
  ASSERT_TRUE(GetKeyString(&input, &value));
  EXPECT_EQ(value, "alpha");
  ASSERT_TRUE(GetKeyString(&input, &value));
  EXPECT_EQ(value, "");
  ASSERT_TRUE(GetKeyString(&input, &value));
  EXPECT_EQ(value, std::string("\0\xff", 2));
  EXPECT_TRUE(input.empty());
  EXPECT_FALSE(GetKeyString(&input, &value));
  std::string_view cut = std::string_view(encoded).substr(0, 4);
  EXPECT_FALSE(GetKeyString(&cut, &value));
  // A string longer than a key may hold is cut at kMaxKeyString bytes.
  std::string longest;
  PutKeyString(&longest, std::string(kMaxKeyString + 10, 'x'));
  EXPECT_EQ(longest.size(), 2 + kMaxKeyString);
  input = longest;
  ASSERT_TRUE(GetKeyString(&input, &value));
  EXPECT_EQ(value.size(), kMaxKeyString);
}

TEST(KeysTest, TaskKeysAreBigEndian) {
  EXPECT_LT(SpecKey(255), SpecKey(256));
  EXPECT_LT(StateKey(255), SpecKey(256));
  EXPECT_LT(FailureKey(255, UINT32_MAX), SpecKey(256));
  TaskId id = 0;
  TaskValueKind kind;
  uint32_t number = 7;
  ASSERT_TRUE(
      DecodeTaskKey(StateKey(0x0102030405060708ull), &id, &kind, &number));
  EXPECT_EQ(id, 0x0102030405060708ull);
  EXPECT_EQ(kind, TaskValueKind::kState);
  EXPECT_EQ(number, 0u);
}

// A task's values sit together, in order: spec, state, then the failure
// history by number; all under TaskPrefix(id) and nothing else there.
TEST(KeysTest, ATasksValuesSitTogetherInOrder) {
  const TaskId id = 300;
  std::vector<std::string> keys = {
      SpecKey(id),           StateKey(id),
      FailureKey(id, 0),     FailureKey(id, 1),
      FailureKey(id, 255),   FailureKey(id, 256),
      FailureKey(id, 70000), FailureKey(id, UINT32_MAX)};
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    EXPECT_LT(keys[i], keys[i + 1]) << i;
  }
  EXPECT_LT(StateKey(id - 1), keys.front());
  EXPECT_LT(FailureKey(id - 1, UINT32_MAX), keys.front());
  EXPECT_LT(keys.back(), SpecKey(id + 1));
  for (const std::string& key : keys) {
    EXPECT_EQ(key.rfind(TaskPrefix(id), 0), 0u);
  }
  EXPECT_EQ(TaskPrefix(id).size(), 8u);
  EXPECT_EQ(SpecKey(id).size(), 9u);
  EXPECT_EQ(StateKey(id).size(), 9u);
  EXPECT_EQ(FailureKey(id, 3).size(), 13u);

  TaskId decoded = 0;
  TaskValueKind kind;
  uint32_t number = 99;
  ASSERT_TRUE(DecodeTaskKey(SpecKey(id), &decoded, &kind, &number));
  EXPECT_EQ(decoded, id);
  EXPECT_EQ(kind, TaskValueKind::kSpec);
  EXPECT_EQ(number, 0u);
  ASSERT_TRUE(DecodeTaskKey(FailureKey(id, 70000), &decoded, &kind, &number));
  EXPECT_EQ(decoded, id);
  EXPECT_EQ(kind, TaskValueKind::kFailure);
  EXPECT_EQ(number, 70000u);
}

TEST(KeysTest, MalformedTaskKeysAreRejected) {
  TaskId id = 0;
  TaskValueKind kind;
  uint32_t number = 0;
  // The id alone, a spec or state key with a number, a failure key without
  // one, and an unknown kind.
  EXPECT_FALSE(DecodeTaskKey(TaskPrefix(1), &id, &kind, &number));
  EXPECT_FALSE(DecodeTaskKey(SpecKey(1) + "1234", &id, &kind, &number));
  EXPECT_FALSE(DecodeTaskKey(StateKey(1) + "x", &id, &kind, &number));
  std::string no_number = TaskPrefix(1);
  no_number.push_back(static_cast<char>(TaskValueKind::kFailure));
  EXPECT_FALSE(DecodeTaskKey(no_number, &id, &kind, &number));
  EXPECT_FALSE(DecodeTaskKey(FailureKey(1, 2) + "x", &id, &kind, &number));
  std::string unknown = TaskPrefix(1);
  unknown.push_back('\x03');
  EXPECT_FALSE(DecodeTaskKey(unknown, &id, &kind, &number));
}

TEST(KeysTest, TaskValueNamesSayWhatTheValueIs) {
  EXPECT_EQ(TaskValueName(SpecKey(7)), "task 7's spec");
  EXPECT_EQ(TaskValueName(StateKey(7)), "task 7's state");
  EXPECT_EQ(TaskValueName(FailureKey(7, 3)), "task 7's failure entry 3");
  EXPECT_EQ(TaskValueName("bad"), "a malformed task key");
}

// Every index entry lives in one family; its first byte says which index,
// so that a scan of one index never meets another's entries.
TEST(KeysTest, IndexKeysStartWithTheirKind) {
  struct Case {
    std::string key;
    IndexKind kind;
  };
  std::vector<Case> cases = {
      {StatusIndexKey(TaskStatus::kPending, "t", 1), IndexKind::kStatus},
      {StatusIndexPrefix(TaskStatus::kHeld), IndexKind::kStatus},
      {StatusIndexPrefix(TaskStatus::kHeld, "t"), IndexKind::kStatus},
      {GroupIndexKey("g", 1), IndexKind::kGroup},
      {GroupIndexPrefix("g"), IndexKind::kGroup},
      {DedupIndexKey("k"), IndexKind::kDedup},
      {WaitingIndexKey(1, 2), IndexKind::kWaiting},
      {WaitingIndexPrefix(1), IndexKind::kWaiting},
      {DueIndexKey(5, 1), IndexKind::kDue},
      {DueIndexPrefix(), IndexKind::kDue},
  };
  std::set<char> kinds;
  for (const Case& c : cases) {
    ASSERT_FALSE(c.key.empty());
    EXPECT_EQ(c.key[0], static_cast<char>(c.kind));
    kinds.insert(static_cast<char>(c.kind));
  }
  EXPECT_EQ(kinds.size(), 5u);
  EXPECT_EQ(DedupIndexKey("k"), "dk");
  EXPECT_EQ(DueIndexPrefix(), "u");
}

// Status entries are (status, type, id): one range per status, in it one
// per type (length-prefixed, so by length, then bytes), in it by id.
TEST(KeysTest, StatusKeysDecodeAndOrderByStatusTypeThenId) {
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    auto status = static_cast<TaskStatus>(s);
    for (const std::string& type : {std::string("t"), std::string("email.send"),
                                    std::string("\0\xff", 2)}) {
      std::string key = StatusIndexKey(status, type, 0x0102030405060708ull);
      EXPECT_EQ(key.rfind(StatusIndexPrefix(status), 0), 0u);
      EXPECT_EQ(key.rfind(StatusIndexPrefix(status, type), 0), 0u);
      TaskStatus decoded_status;
      std::string_view decoded_type;
      TaskId id = 0;
      ASSERT_TRUE(
          DecodeStatusIndexKey(key, &decoded_status, &decoded_type, &id));
      EXPECT_EQ(decoded_status, status);
      EXPECT_EQ(decoded_type, type);
      EXPECT_EQ(id, 0x0102030405060708ull);
      EXPECT_LT(StatusIndexKey(status, type, 255),
                StatusIndexKey(status, type, 256));
      if (s + 1 < kTaskStatusCount) {
        EXPECT_LT(StatusIndexKey(status, type, UINT64_MAX),
                  StatusIndexKey(static_cast<TaskStatus>(s + 1), "a", 0));
      }
    }
    // Within a status, one type's range, then the next one's.
    EXPECT_LT(StatusIndexKey(status, "a", UINT64_MAX),
              StatusIndexKey(status, "b", 0));
    EXPECT_LT(StatusIndexKey(status, "z", UINT64_MAX),
              StatusIndexKey(status, "aa", 0));
    EXPECT_LT(StatusIndexKey(status, "\xff", UINT64_MAX),
              StatusIndexKey(status, "aa", 0));
  }
  TaskStatus status;
  std::string_view type;
  TaskId id = 0;
  std::string key = StatusIndexKey(TaskStatus::kPending, "t", 5);
  EXPECT_FALSE(DecodeStatusIndexKey(key.substr(1), &status, &type, &id));
  EXPECT_FALSE(DecodeStatusIndexKey(key + "x", &status, &type, &id));
  EXPECT_FALSE(
      DecodeStatusIndexKey(key.substr(0, key.size() - 1), &status, &type, &id));
  EXPECT_FALSE(DecodeStatusIndexKey(
      StatusIndexPrefix(TaskStatus::kPending, "t"), &status, &type, &id));
  std::string other_kind = key;
  other_kind[0] = static_cast<char>(IndexKind::kGroup);
  EXPECT_FALSE(DecodeStatusIndexKey(other_kind, &status, &type, &id));
  std::string bad_status = key;
  bad_status[1] = static_cast<char>(kTaskStatusCount);
  EXPECT_FALSE(DecodeStatusIndexKey(bad_status, &status, &type, &id));
  // A type length that runs past the key.
  std::string bad_length = key;
  bad_length[3] = 9;
  EXPECT_FALSE(DecodeStatusIndexKey(bad_length, &status, &type, &id));
}

TEST(KeysTest, TrailingIdsOfEveryIdOrderedIndex) {
  TaskId id = 0;
  ASSERT_TRUE(
      DecodeTrailingId(StatusIndexKey(TaskStatus::kRunning, "t", 9), &id));
  EXPECT_EQ(id, 9u);
  ASSERT_TRUE(DecodeTrailingId(GroupIndexKey("g", 10), &id));
  EXPECT_EQ(id, 10u);
  ASSERT_TRUE(DecodeTrailingId(WaitingIndexKey(3, 11), &id));
  EXPECT_EQ(id, 11u);
  EXPECT_EQ(WaitingIndexKey(3, 11).rfind(WaitingIndexPrefix(3), 0), 0u);
  EXPECT_NE(WaitingIndexKey(3, 11).rfind(WaitingIndexPrefix(11), 0), 0u);
}

}  // namespace
}  // namespace spool::storage
