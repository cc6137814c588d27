#include "storage/keys.h"

#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace spool::storage {
namespace {

TEST(KeysTest, PriorityEncodingSortsHigherPriorityFirst) {
  std::vector<int32_t> priorities = {INT32_MIN, -100, -1, 0, 1, 7, INT32_MAX};
  for (size_t i = 0; i + 1 < priorities.size(); ++i) {
    EXPECT_GT(EncodePriority(priorities[i]), EncodePriority(priorities[i + 1]))
        << priorities[i] << " vs " << priorities[i + 1];
  }
  for (int32_t p : priorities) EXPECT_EQ(DecodePriority(EncodePriority(p)), p);
}

TEST(KeysTest, ReadyKeysOrderByPriorityThenSequence) {
  std::mt19937_64 rng(7);
  std::vector<ReadyKey> keys;
  for (int i = 0; i < 2000; ++i) {
    keys.push_back({static_cast<int32_t>(rng() % 11) - 5, rng() % 100000});
  }
  std::vector<std::string> encoded;
  for (const auto& k : keys) encoded.push_back(EncodeReadyKey(k));
  std::sort(keys.begin(), keys.end(), [](const ReadyKey& a, const ReadyKey& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.sequence < b.sequence;
  });
  std::sort(encoded.begin(), encoded.end());
  ASSERT_EQ(keys.size(), encoded.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ReadyKey decoded;
    ASSERT_TRUE(DecodeReadyKey(encoded[i], &decoded));
    EXPECT_EQ(decoded.priority, keys[i].priority);
    EXPECT_EQ(decoded.sequence, keys[i].sequence);
  }
}

TEST(KeysTest, ScheduledKeysOrderByTimeIncludingNegative) {
  std::vector<int64_t> times = {INT64_MIN,        -5,       0, 1,
                                1700000000000000, INT64_MAX};
  for (size_t i = 0; i + 1 < times.size(); ++i) {
    EXPECT_LT(EncodeScheduledKey({times[i], 9}),
              EncodeScheduledKey({times[i + 1], 0}));
  }
  ScheduledKey out;
  ASSERT_TRUE(DecodeScheduledKey(EncodeScheduledKey({-5, 42}), &out));
  EXPECT_EQ(out.due_us, -5);
  EXPECT_EQ(out.sequence, 42u);
}

TEST(KeysTest, DecodersRejectWrongLengths) {
  TaskId id;
  ReadyKey ready;
  ScheduledKey scheduled;
  QueueValue value;
  EXPECT_FALSE(DecodeTaskKey("short", &id));
  EXPECT_FALSE(DecodeReadyKey("0123456789a", &ready));
  EXPECT_FALSE(DecodeScheduledKey("", &scheduled));
  EXPECT_FALSE(DecodeQueueValue("12345678901", &value));
  std::string encoded = EncodeQueueValue({77, -3, "email", "customer-1"});
  ASSERT_TRUE(DecodeQueueValue(encoded, &value));
  EXPECT_EQ(value.id, 77u);
  EXPECT_EQ(value.priority, -3);
  EXPECT_EQ(value.type, "email");
  EXPECT_EQ(value.group, "customer-1");
  EXPECT_FALSE(DecodeQueueValue(encoded + "x", &value));
  EXPECT_FALSE(DecodeQueueValue(encoded.substr(0, encoded.size() - 1), &value));
}

TEST(KeysTest, KeyStringsAreLengthPrefixedSoPrefixesDoNotCollide) {
  std::string a = TypeIndexKey("ab", TaskStatus::kPending, 1);
  std::string abc = TypeIndexKey("abc", TaskStatus::kPending, 1);
  EXPECT_NE(abc.substr(0, TypeIndexPrefix("ab").size()), TypeIndexPrefix("ab"));
  EXPECT_EQ(a.substr(0, TypeIndexPrefix("ab").size()), TypeIndexPrefix("ab"));
  TaskId id = 0;
  ASSERT_TRUE(
      DecodeTrailingId(TypeIndexKey("t", TaskStatus::kFailed, 42), &id));
  EXPECT_EQ(id, 42u);
  std::string_view type;
  TaskStatus status;
  std::string with_nul("x\0y", 3);
  // `type` views the key, so the key must outlive it.
  const std::string count_key = TypeCountKey(with_nul, TaskStatus::kHeld);
  ASSERT_TRUE(DecodeTypeCountKey(count_key, &type, &status));
  EXPECT_EQ(type, with_nul);
  EXPECT_EQ(status, TaskStatus::kHeld);
  EXPECT_EQ(PrefixSuccessor("ab"), "ac");
  EXPECT_EQ(PrefixSuccessor(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixSuccessor(std::string("\xff\xff", 2)), "");
}

TEST(KeysTest, TaskKeysAreBigEndian) {
  EXPECT_LT(TaskKey(255), TaskKey(256));
  TaskId id = 0;
  ASSERT_TRUE(DecodeTaskKey(TaskKey(0x0102030405060708ull), &id));
  EXPECT_EQ(id, 0x0102030405060708ull);
}

}  // namespace
}  // namespace spool::storage
