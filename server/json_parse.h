// Parsing JSON a client sent, within spool::kMaxJsonDepth.
//
// nlohmann-json parses without recursion, but dump() and code that walks a
// value recurse: a 200 KB body of nested arrays used to crash spoold in
// dump(). The depth is checked by the parser's callback as each array or
// object opens, so a deeper document is refused before any recursive code
// sees it, and before the rest of it is read.

#ifndef SPOOL_SERVER_JSON_PARSE_H_
#define SPOOL_SERVER_JSON_PARSE_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include <spool/status.h>

namespace spool::http {

// Parses `text` as one JSON document into *out. InvalidArgument naming
// `what` (e.g. "request body") and why: malformed (with the byte), a
// number no double holds (1e999), or nested deeper than kMaxJsonDepth.
// Never throws.
Status ParseJson(std::string_view text, std::string_view what,
                 nlohmann::json* out);

}  // namespace spool::http

#endif  // SPOOL_SERVER_JSON_PARSE_H_
