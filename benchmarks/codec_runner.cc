// The codec scenario: runs the Google Benchmark microbenchmarks linked into
// spool-bench (codec_bench.cc, json_bench.cc) with a reporter that turns each
// into rows: the median over `plan.rounds` repetitions of operations per
// second, and of items per second where a benchmark processes many items
// per operation (JSON listing).

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "benchmarks/scenarios.h"

namespace spool::bench {
namespace {

// "BM_ListTasksJson/1000/1" -> "ListTasksJson/1000/1"; names set with
// ->Name() are kept.
std::string ShortName(const std::string& name) {
  return name.rfind("BM_", 0) == 0 ? name.substr(3) : name;
}

class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      // Aggregates are computed here, as for every other scenario.
      if (run.run_type != Run::RT_Iteration) continue;
      const std::string name = ShortName(run.run_name.str());
      if (run.error_occurred) {
        errors_.push_back(name + ": " + run.error_message);
        continue;
      }
      if (run.real_accumulated_time <= 0 || run.iterations == 0) continue;
      if (order_.count(name) == 0) {
        order_[name] = names_.size();
        names_.push_back(name);
      }
      ops_[name].push_back(static_cast<double>(run.iterations) /
                           run.real_accumulated_time);
      // Google Benchmark's rate is per CPU second; ours, as seed 004's, per
      // wall-clock second, like ops_per_s.
      auto items = run.counters.find("items_per_second");
      if (items != run.counters.end()) {
        double total = items->second.value * run.cpu_accumulated_time;
        items_[name].push_back(total / run.real_accumulated_time);
      }
      Progress("codec %s: %.0f ops/s", name.c_str(), ops_[name].back());
    }
  }

  const std::vector<std::string>& names() const { return names_; }
  std::map<std::string, std::vector<double>>& ops() { return ops_; }
  std::map<std::string, std::vector<double>>& items() { return items_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> names_;
  std::map<std::string, size_t> order_;
  std::map<std::string, std::vector<double>> ops_;
  std::map<std::string, std::vector<double>> items_;
  std::vector<std::string> errors_;
};

}  // namespace

Status RunCodecScenario(const Plan& plan, Reporter* out) {
  Progress("spool codec: Google Benchmark, %d repetitions, min %.2f s each",
           plan.rounds, plan.codec_min_time_s);
  std::vector<std::string> args = {
      "spool-bench",
      "--benchmark_min_time=" + std::to_string(plan.codec_min_time_s),
      "--benchmark_min_warmup_time=" + std::to_string(plan.codec_min_time_s),
      "--benchmark_repetitions=" + std::to_string(plan.rounds),
  };
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data())) {
    return Status::InvalidArgument("codec: Google Benchmark rejected a flag");
  }
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  for (const std::string& name : reporter.names()) {
    Row row;
    row.scenario = "codec";
    row.system = "spool";
    row.variant = name;
    row.group = "codec";
    row.metric = "ops_per_s";
    row.value = Median(reporter.ops()[name]);
    row.unit = "ops/s";
    out->AddRow(row);
    auto items = reporter.items().find(name);
    if (items != reporter.items().end()) {
      row.metric = "items_per_s";
      row.value = Median(items->second);
      row.unit = "items/s";
      out->AddRow(row);
    }
  }
  for (const std::string& error : reporter.errors()) out->Error(error);
  if (!reporter.errors().empty()) {
    return Status::Aborted("codec: " + reporter.errors().front());
  }
  return Status::OK();
}

}  // namespace spool::bench
