// spool-reads-bench: the read side's measurements alone, as CSV on stdout.
//
//   spool-reads-bench [--rounds N] [--quick] [--scenario NAME]...
//                     [--readers N] [--durability sync|relaxed|memory]
//                     [--dir DIR]
//
// Rows: scenario,system,variant,metric,value,unit (see reads_bench.h).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "benchmarks/reads_bench.h"

int main(int argc, char** argv) {
  spool::bench::ReadsBenchOptions options;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--rounds") {
      options.rounds = std::atoi(next().c_str());
    } else if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--scenario") {
      options.scenarios.push_back(next());
    } else if (arg == "--readers") {
      options.readers = std::atoi(next().c_str());
    } else if (arg == "--durability") {
      std::string d = next();
      options.durability = d == "sync"     ? spool::Durability::kSync
                           : d == "memory" ? spool::Durability::kMemory
                                           : spool::Durability::kRelaxed;
    } else if (arg == "--dir") {
      dir = next();
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds N] [--quick] [--scenario NAME]... "
                   "[--readers N] [--durability sync|relaxed|memory] "
                   "[--dir DIR]\nscenarios:",
                   argv[0]);
      for (const auto& name : spool::bench::ReadsScenarioNames()) {
        std::fprintf(stderr, " %s", name.c_str());
      }
      std::fprintf(stderr, "\n");
      return 2;
    }
  }
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "spool-reads-XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = pattern;
  }
  options.dir = dir;
  std::printf("scenario,system,variant,metric,value,unit\n");
  std::fflush(stdout);
  spool::Status s = spool::bench::RunReadsBenchmarks(
      options, [](const spool::bench::ReadsRow& row) {
        std::printf("%s\n", spool::bench::ReadsRowCsv(row).c_str());
        std::fflush(stdout);
      });
  if (own_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "spool-reads-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
