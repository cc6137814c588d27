#include "server/json_parse.h"

#include <string>

#include <spool/query.h>

namespace spool::http {
namespace {

struct TooDeep {};

}  // namespace

Status ParseJson(std::string_view text, std::string_view what,
                 nlohmann::json* out) {
  using Event = nlohmann::json::parse_event_t;
  // `depth` is the number of enclosing arrays and objects, so the one
  // opening at depth kMaxJsonDepth would be the (kMaxJsonDepth + 1)th.
  auto bounded = [](int depth, Event event, nlohmann::json&) {
    if ((event == Event::array_start || event == Event::object_start) &&
        depth >= static_cast<int>(kMaxJsonDepth)) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    *out = nlohmann::json::parse(text.begin(), text.end(), bounded);
  } catch (const TooDeep&) {
    return Status::InvalidArgument(
        std::string(what) + ": JSON nested deeper than " +
        std::to_string(kMaxJsonDepth) + " arrays and objects");
  } catch (const nlohmann::json::parse_error& error) {
    return Status::InvalidArgument(
        std::string(what) + ": malformed JSON at byte " +
        std::to_string(error.byte) + ": " + error.what());
  } catch (const nlohmann::json::exception& error) {
    // The parser throws out_of_range for a number no double holds (1e999):
    // not a parse_error, and uncaught it would end spoold.
    return Status::InvalidArgument(std::string(what) + ": " + error.what());
  }
  return Status::OK();
}

}  // namespace spool::http
