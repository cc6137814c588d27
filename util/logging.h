// spool's logger: spdlog logger "spool", on stderr, quiet by default.

#ifndef SPOOL_UTIL_LOGGING_H_
#define SPOOL_UTIL_LOGGING_H_

#include <memory>

#include <spool/options.h>

namespace spdlog {
class logger;
}

namespace spool {

// The shared logger, created on first use. Never null.
std::shared_ptr<spdlog::logger> Logger();

// Sets the logger's level.
void SetLogLevel(LogLevel level);

}  // namespace spool

#endif  // SPOOL_UTIL_LOGGING_H_
