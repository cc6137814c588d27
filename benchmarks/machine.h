// What machine a run measured: every figure depends on it, the disk above
// all (one fdatasync is 50 µs on this kind of VM and 2.6 ms on a cloud
// volume), so the report always says.

#ifndef SPOOL_BENCHMARKS_MACHINE_H_
#define SPOOL_BENCHMARKS_MACHINE_H_

#include <array>
#include <map>
#include <string>

namespace spool::bench {

struct MachineInfo {
  int cores = 0;
  std::string cpu_model;
  unsigned long long memory_bytes = 0;
  // The disk holding the scratch directories.
  std::string scratch_dir;
  std::string disk_device;       // e.g. "/dev/vda"
  std::string disk_filesystem;   // e.g. "ext4"
  std::string disk_mount;        // e.g. "/"
  std::string disk_model;        // may be empty (virtio)
  std::string disk_rotational;   // "yes", "no" or ""
  std::string disk_write_cache;  // "write back", "write through" or ""
  unsigned long long disk_bytes = 0;
  std::string kernel;
  // The load averages (1, 5, 15 minutes) when the run started and ended.
  std::array<double, 3> load_start{};
  std::array<double, 3> load_end{};
  // "spool", "rocksdb", "caf", "flatbuffers", "compiler", plus the peers'.
  std::map<std::string, std::string> versions;
};

// Reads /proc, /sys and uname for the machine and the disk under
// `scratch_dir`. Fields that cannot be read stay empty.
MachineInfo DescribeMachine(const std::string& scratch_dir);

// The 1, 5 and 15 minute load averages; zeros when unreadable.
std::array<double, 3> LoadAverages();

// "2 cores (Intel Xeon Processor), 23.4 GiB, /dev/vda ext4 (non-rotational,
// write back), Linux 6.1.0"
std::string MachineSummary(const MachineInfo& machine);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_MACHINE_H_
