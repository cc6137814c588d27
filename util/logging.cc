#include "util/logging.h"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace spool {

std::shared_ptr<spdlog::logger> Logger() {
  static std::once_flag once;
  static std::shared_ptr<spdlog::logger> logger;
  std::call_once(once, [] {
    logger = spdlog::get("spool");
    if (!logger) {
      logger = spdlog::stderr_color_mt("spool");
      logger->set_level(spdlog::level::warn);
    }
  });
  return logger;
}

void SetLogLevel(LogLevel level) {
  static constexpr spdlog::level::level_enum kLevels[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  Logger()->set_level(kLevels[static_cast<int>(level)]);
}

}  // namespace spool
