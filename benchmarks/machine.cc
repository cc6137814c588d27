#include "benchmarks/machine.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <caf/config.hpp>
#include <flatbuffers/base.h>
#include <rocksdb/version.h>

#include "benchmarks/bench_util.h"

namespace spool::bench {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? "" : s.substr(start);
}

// The value after "key:" in a /proc file of "key: value" lines.
std::string ProcField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return Trim(line.substr(colon + 1));
    }
  }
  return "";
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? buf : path;
}

// Finds the mount holding `path` in /proc/self/mountinfo: the longest mount
// point that is a prefix of it.
void FindMount(const std::string& path, MachineInfo* m) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  size_t best = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source;
    tail >> fstype >> source;
    bool prefix = path.rfind(mount_point, 0) == 0 &&
                  (mount_point == "/" || path.size() == mount_point.size() ||
                   path[mount_point.size()] == '/');
    if (prefix && mount_point.size() >= best) {
      best = mount_point.size();
      m->disk_mount = mount_point;
      m->disk_filesystem = fstype;
      m->disk_device = source;
    }
  }
}

void FindBlockDevice(const std::string& path, MachineInfo* m) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  std::string sys = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                    std::to_string(minor(st.st_dev));
  std::string dev = RealPath(sys);
  // A partition's queue settings live in its parent disk.
  if (access((dev + "/partition").c_str(), F_OK) == 0) {
    dev = dev.substr(0, dev.rfind('/'));
  }
  std::string rotational = ReadFirstLine(dev + "/queue/rotational");
  if (!rotational.empty())
    m->disk_rotational = rotational == "1" ? "yes" : "no";
  m->disk_write_cache = ReadFirstLine(dev + "/queue/write_cache");
  m->disk_model = Trim(ReadFirstLine(dev + "/device/model"));
  std::string sectors = ReadFirstLine(dev + "/size");
  if (!sectors.empty())
    m->disk_bytes = std::strtoull(sectors.c_str(), nullptr, 10) * 512;
}

}  // namespace

std::array<double, 3> LoadAverages() {
  std::array<double, 3> load{};
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return load;
  if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) {
    load = {};
  }
  std::fclose(f);
  return load;
}

MachineInfo DescribeMachine(const std::string& scratch_dir) {
  MachineInfo m;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  m.cores = cores > 0 ? static_cast<int>(cores) : 0;
  m.cpu_model = ProcField("/proc/cpuinfo", "model name");
  std::string mem_kb = ProcField("/proc/meminfo", "MemTotal");
  m.memory_bytes = std::strtoull(mem_kb.c_str(), nullptr, 10) * 1024;
  m.scratch_dir = RealPath(scratch_dir);
  FindMount(m.scratch_dir, &m);
  FindBlockDevice(m.scratch_dir, &m);
  utsname u;
  if (uname(&u) == 0) {
    m.kernel = std::string(u.sysname) + " " + u.release;
  }
  m.load_start = LoadAverages();

#ifdef SPOOL_VERSION
  m.versions["spool"] = SPOOL_VERSION;
#endif
  m.versions["rocksdb"] = std::to_string(ROCKSDB_MAJOR) + "." +
                          std::to_string(ROCKSDB_MINOR) + "." +
                          std::to_string(ROCKSDB_PATCH);
  m.versions["caf"] = std::to_string(CAF_VERSION / 10000) + "." +
                      std::to_string(CAF_VERSION / 100 % 100) + "." +
                      std::to_string(CAF_VERSION % 100);
  m.versions["flatbuffers"] = std::to_string(FLATBUFFERS_VERSION_MAJOR) + "." +
                              std::to_string(FLATBUFFERS_VERSION_MINOR) + "." +
                              std::to_string(FLATBUFFERS_VERSION_REVISION);
#if defined(__clang__)
  m.versions["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m.versions["compiler"] = std::string("GCC ") + __VERSION__;
#endif
  return m;
}

std::string MachineSummary(const MachineInfo& m) {
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB",
                static_cast<double>(m.memory_bytes) / (1ull << 30));
  std::string out = std::to_string(m.cores) + " cores";
  if (!m.cpu_model.empty()) out += " (" + m.cpu_model + ")";
  out += ", " + std::string(memory) + " RAM";
  out += ", disk " + (m.disk_device.empty() ? "?" : m.disk_device);
  if (!m.disk_filesystem.empty()) out += " " + m.disk_filesystem;
  std::string traits;
  if (!m.disk_model.empty()) traits += m.disk_model;
  if (!m.disk_rotational.empty()) {
    traits += (traits.empty() ? "" : ", ") +
              std::string(m.disk_rotational == "yes" ? "rotational"
                                                     : "non-rotational");
  }
  if (!m.disk_write_cache.empty()) {
    traits += (traits.empty() ? "" : ", ") + m.disk_write_cache + " cache";
  }
  if (!traits.empty()) out += " (" + traits + ")";
  out += " under " + m.scratch_dir;
  if (!m.kernel.empty()) out += ", " + m.kernel;
  return out;
}

}  // namespace spool::bench
