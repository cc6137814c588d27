// spool's logger: spdlog logger "spool", on stderr, quiet by default; and
// the sinks that embedding applications register through Options::log_sink.
//
// The logger is process-wide: every runtime in the process logs through it.
// A registered sink receives every line of it, whichever runtime wrote it,
// and while at least one sink is registered the stderr sink is silent (the
// application's logging has the lines).

#ifndef SPOOL_UTIL_LOGGING_H_
#define SPOOL_UTIL_LOGGING_H_

#include <cstdint>
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

// Registers `sink` for every line the logger writes from now on and returns
// a token for RemoveLogSink (never 0). `sink` must not be null. Thread-safe.
uint64_t AddLogSink(LogSink sink);

// Unregisters the sink of `token`; once it returns, the sink is not called
// again. 0 and unknown tokens are ignored. Must not be called from a sink.
void RemoveLogSink(uint64_t token);

}  // namespace spool

#endif  // SPOOL_UTIL_LOGGING_H_
