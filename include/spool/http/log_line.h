// spoold's own lines on stderr, "[2026-12-07 15:00:38.597] spoold: ...",
// timestamped as the runtime's spdlog lines beside them are, so that a
// failover can be followed across the nodes' logs.

#ifndef SPOOL_INCLUDE_HTTP_LOG_LINE_H_
#define SPOOL_INCLUDE_HTTP_LOG_LINE_H_

#include <string>

namespace spool::http {

// Writes "[local time with ms] spoold: " + `line` + "\n" to stderr in one
// write, so that concurrent lines never interleave.
void LogLine(const std::string& line);

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_LOG_LINE_H_
