#include <chrono>
#include <cstdio>
#include <ctime>
#include <unistd.h>

#include <spool/http/log_line.h>

namespace spool::http {

void LogLine(const std::string& line) {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t seconds = system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[40];
  size_t n = std::strftime(stamp, sizeof(stamp), "[%Y-%m-%d %H:%M:%S", &local);
  long ms = static_cast<long>(
      duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000);
  std::snprintf(stamp + n, sizeof(stamp) - n, ".%03ld] ", ms);
  std::string out = std::string(stamp) + "spoold: " + line + "\n";
  // One write(2): lines of several threads stay whole.
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  static_cast<void>(ignored);
}

}  // namespace spool::http
