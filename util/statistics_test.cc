// The histograms behind spool::Statistics and FormatPrometheus's text.

#include <spool/statistics.h>

#include <gtest/gtest.h>

#include "util/metrics.h"

namespace spool {
namespace {

TEST(MetricsHistogramTest, CountsEachValueInTheFirstBucketAboveIt) {
  metrics::Histogram h(metrics::BatchBuckets());  // 1, 2, 4, ..., 4096
  h.Record(0);
  h.Record(1);
  h.Record(2);
  h.Record(3);
  h.Record(4096);
  h.Record(4097);
  HistogramStatistics s = h.Snapshot();
  ASSERT_EQ(s.upper_bounds.size(), 13u);
  ASSERT_EQ(s.counts.size(), 14u);
  EXPECT_EQ(s.counts[0], 2u);   // 0 and 1
  EXPECT_EQ(s.counts[1], 1u);   // 2
  EXPECT_EQ(s.counts[2], 1u);   // 3
  EXPECT_EQ(s.counts[12], 1u);  // 4096
  EXPECT_EQ(s.counts[13], 1u);  // above every bound
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 0 + 1 + 2 + 3 + 4096 + 4097);
}

TEST(MetricsHistogramTest, LatenciesAreInSeconds) {
  metrics::Histogram h(metrics::LatencyBuckets());
  h.Record(1'500'000);  // 1.5 ms
  HistogramStatistics s = h.Snapshot();
  EXPECT_DOUBLE_EQ(s.upper_bounds.front(), 1e-5);
  EXPECT_DOUBLE_EQ(s.upper_bounds.back(), 100);
  EXPECT_DOUBLE_EQ(s.sum, 0.0015);
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    bool here = s.upper_bounds[i] >= 0.0015 &&
                (i == 0 || s.upper_bounds[i - 1] < 0.0015);
    EXPECT_EQ(s.counts[i], here ? 1u : 0u) << "bucket " << i;
  }
}

TEST(MetricsTest, TypeSlotsAreCreatedOnceAndListedInOrder) {
  metrics::Metrics m;
  metrics::TypeSlot* b = m.Slot("b");
  EXPECT_EQ(m.Slot("b"), b);
  m.Slot("a");
  metrics::SlotCache cache(&m);
  EXPECT_EQ(cache.Get("b"), b);
  b->handler_run.Record(1000);
  b->tasks[static_cast<size_t>(TaskStatus::kPending)].store(7);
  Statistics s = m.Snapshot();
  ASSERT_EQ(s.types.size(), 2u);
  EXPECT_EQ(s.types[0].type, "a");
  EXPECT_EQ(s.types[1].type, "b");
  EXPECT_EQ(s.types[1].handler_seconds.count, 1u);
  EXPECT_EQ(s.types[1].tasks[static_cast<size_t>(TaskStatus::kPending)], 7u);
}

TEST(FormatPrometheusTest, WritesCumulativeBucketsAndEscapedLabels) {
  metrics::Metrics m;
  m.enqueued = 3;
  m.commit_batch.Record(1);
  m.commit_batch.Record(3);
  m.Slot("say \"hi\"\\\n")->handler_run.Record(2'000'000);
  std::string text = FormatPrometheus(m.Snapshot());

  EXPECT_NE(text.find("# HELP spool_tasks_enqueued_total "), std::string::npos);
  EXPECT_NE(text.find("# TYPE spool_tasks_enqueued_total counter\n"
                      "spool_tasks_enqueued_total 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE spool_commit_batch_tasks histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("spool_commit_batch_tasks_bucket{le=\"1\"} 1\n"
                      "spool_commit_batch_tasks_bucket{le=\"2\"} 1\n"
                      "spool_commit_batch_tasks_bucket{le=\"4\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("spool_commit_batch_tasks_bucket{le=\"+Inf\"} 2\n"
                      "spool_commit_batch_tasks_sum 4\n"
                      "spool_commit_batch_tasks_count 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("spool_handler_duration_seconds_bucket{type=\"say "
                      "\\\"hi\\\"\\\\\\n\",le=\"0.0025\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spool_type_tasks{type=\"say \\\"hi\\\"\\\\\\n\","
                      "status=\"pending\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("spool_tasks{status=\"succeeded\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace spool
