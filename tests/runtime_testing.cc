#include "tests/runtime_testing.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace spool::testing {

std::unique_ptr<Runtime> OpenOrDie(const Options& options) {
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return runtime;
}

Status Ok(TaskContext&) { return Status::OK(); }

std::vector<std::string> FilesContaining(const std::string& dir,
                                         const std::string& marker) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (bytes.str().find(marker) != std::string::npos) {
      found.push_back(entry.path().filename().string());
    }
  }
  return found;
}

}  // namespace spool::testing
