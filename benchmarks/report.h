// The report of one run: the table (text or Markdown), the JSON object, the
// goals of issues 2, 3, 4 and 6 with the measured ratio, and the SVG chart.

#ifndef SPOOL_BENCHMARKS_REPORT_H_
#define SPOOL_BENCHMARKS_REPORT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench_util.h"
#include "benchmarks/machine.h"

namespace spool::bench {

struct RunReport {
  MachineInfo machine;
  Plan plan;
  std::string command;     // The command line, for reproduction.
  std::string started_at;  // UTC, RFC 3339.
  double duration_s = 0;
  std::vector<std::string> scenarios;
  std::vector<std::string> peers;
  // How spool was configured: the source and the options in force.
  std::string spool_config;
  // One line per system: version and durability settings.
  std::map<std::string, std::string> systems;
  std::vector<Row> rows;
  // Skipped peers, failed or crashed workers, methodology remarks.
  std::vector<std::string> notes;
};

// A goal of issue 2 or 6, evaluated against a run.
struct GoalResult {
  std::string issue;  // "6", "2" or "2, 6"
  std::string goal;   // The goal as the issue states it.
  std::string scenario;
  std::string measured;
  std::string target;
  // True/false when measured; empty when a figure is missing.
  std::optional<bool> met;
  std::string verdict;  // "met", "missed by 29%", "not measured: ..."
};

std::vector<GoalResult> EvaluateGoals(const RunReport& report);

// True for metrics where less is better (latencies, times).
bool LowerIsBetter(const std::string& metric);

std::string FormatTable(const RunReport& report);
std::string FormatMarkdown(const RunReport& report,
                           const std::string& chart_path);
std::string FormatJson(const RunReport& report);

// Bars of spool beside its peers and limits, one panel per key figure, on a
// log scale where the values span more than a factor of 20.
std::string RenderSvg(const RunReport& report);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_REPORT_H_
