// fuzz_http_request: what spoold does with the bytes of one request before
// a handler acts on them (server/http_server.cc, Connection::OnRead): Boost
// Beast's parser with spoold's header and body limits, then spool's own
// parsing of the Host, the Authorization header, the target's query and
// the JSON bodies of every POST route.
//
// The input is the raw request, as a client sends it. Invariants checked:
//   - the parser stops at the limits: a header block over 16 KiB or a body
//     over max_body_bytes is refused, never buffered;
//   - HostName gives a lower-case name without a port, or nothing;
//   - BearerMatches admits exactly "Bearer <token>";
//   - UrlDecode never grows its input;
//   - ParseTaskQuery keeps limit within 1..kMaxPageSize when it accepts;
//   - ParseJson refuses anything nested deeper than kMaxJsonDepth, and what
//     it accepts dumps without throwing;
//   - no parser throws, whatever the body.

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <spool/http/server_options.h>
#include <spool/query.h>

#include "fuzz/fuzz_support.h"
#include "server/api_json.h"
#include "server/bearer_token.h"
#include "server/json_parse.h"
#include "server/request_guard.h"

namespace spool::fuzz {
namespace {

namespace bhttp = boost::beast::http;
using namespace spool::http;

std::string_view View(boost::beast::string_view text) {
  return {text.data(), text.size()};
}

constexpr size_t kHeaderLimit = 16 * 1024;  // as Connection::ReadRequest
constexpr std::string_view kToken = "0123456789abcdef-fuzz-token";

// The depth of a parsed value, without recursion (the value may be as deep
// as a parser let it be).
size_t Depth(const nlohmann::json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::json*, size_t>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const nlohmann::json& child : *value)
      stack.push_back({&child, depth + 1});
  }
  return deepest;
}

void CheckHost(std::string_view host) {
  const std::string name = HostName(host);
  for (char c : name) {
    FUZZ_CHECK(!std::isupper(static_cast<unsigned char>(c)),
               "HostName left upper case in " + Printable(name));
  }
  // A bracketed IPv6 literal keeps its colons; any other name loses the
  // port and has no brackets.
  if (!name.empty() && name.front() != '[') {
    FUZZ_CHECK(name.find_first_of(":[]") == std::string::npos,
               "HostName kept a port or a bracket: " + Printable(name));
  } else if (!name.empty()) {
    FUZZ_CHECK(
        name.back() == ']' && name.find_first_of("[]", 1) == name.size() - 1,
        "HostName gave a malformed literal: " + Printable(name));
  }
}

void CheckAuthorization(std::string_view authorization) {
  // The reference: the scheme without case (RFC 7235), one space, the
  // token itself.
  std::string scheme(authorization.substr(0, 7));
  for (char& c : scheme) c = static_cast<char>(std::tolower(c));
  const bool expected =
      scheme == "bearer " &&
      authorization.substr(std::min<size_t>(7, authorization.size())) == kToken;
  FUZZ_CHECK(BearerMatches(authorization, kToken) == expected,
             std::string("BearerMatches says ") + (expected ? "no" : "yes") +
                 " to " + Printable(authorization));
  FUZZ_CHECK(!BearerMatches(authorization, ""),
             "BearerMatches admitted a header against an empty token");
}

void CheckTarget(std::string_view target) {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query = question == std::string_view::npos
                                     ? std::string_view()
                                     : target.substr(question + 1);
  for (bool plus : {false, true}) {
    if (auto decoded = UrlDecode(path, plus)) {
      FUZZ_CHECK(decoded->size() <= path.size(),
                 "UrlDecode grew " + Printable(path));
    }
  }
  TaskQuery parsed;
  for (bool strict : {false, true}) {
    parsed = TaskQuery();
    if (ParseTaskQuery(query, strict, &parsed).ok()) {
      FUZZ_CHECK(parsed.limit >= 1 && parsed.limit <= kMaxPageSize,
                 "ParseTaskQuery accepted limit " +
                     std::to_string(parsed.limit) + " from " +
                     Printable(query));
    }
  }
  (void)QueryParameter(query, "cursor");
}

void CheckBody(const std::string& body) {
  nlohmann::json value;
  if (ParseJson(body, "request body", &value).ok()) {
    FUZZ_CHECK(Depth(value) <= kMaxJsonDepth,
               "ParseJson accepted depth " + std::to_string(Depth(value)));
    (void)value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  }
  // Every route's body parser, whatever the route: none may throw.
  TaskSpec spec;
  (void)ParseTaskRequest(body, &spec);
  std::vector<TaskSpec> specs;
  if (ParseBatchRequest(body, &specs).ok()) {
    FUZZ_CHECK(!specs.empty(), "a batch of no tasks was accepted");
  }
  std::optional<RetryPolicy> policy;
  (void)ParseRetryRequest(body, &policy);
  PurgeOptions purge;
  (void)ParsePurgeRequest(body, &purge);
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const size_t body_limit = spool::http::ServerOptions().max_body_bytes;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(body_limit);
  parser.eager(true);
  boost::beast::error_code ec;
  const char* bytes = reinterpret_cast<const char*>(data);
  size_t offset = 0;
  // As the connection feeds it: what arrived, until the message is whole,
  // the parser wants more, or it refuses.
  while (offset < size && !parser.is_done()) {
    const size_t used =
        parser.put(boost::asio::buffer(bytes + offset, size - offset), ec);
    if (ec == bhttp::error::need_more) break;
    if (ec) break;
    if (used == 0) break;
    offset += used;
  }
  if (ec == bhttp::error::header_limit) {
    FUZZ_CHECK(size > kHeaderLimit,
               "header_limit reported for " + std::to_string(size) + " bytes");
    return 0;
  }
  if (!parser.is_header_done()) return 0;
  const auto& request = parser.get();
  FUZZ_CHECK(request.body().size() <= body_limit,
             "the parser buffered a body of " +
                 std::to_string(request.body().size()) + " bytes");
  for (const auto& field : request) {
    if (field.name() == bhttp::field::host) CheckHost(View(field.value()));
    if (field.name() == bhttp::field::authorization) {
      CheckAuthorization(View(field.value()));
    }
  }
  CheckTarget(View(request.target()));
  if (parser.is_done()) CheckBody(request.body());
  return 0;
}
