#include "actors/handler_registry.h"

#include <exception>

namespace spool::actors {

Outcome RunAttempt(const HandlerRegistry& registry,
                   const storage::TaskRecord& record) {
  Outcome outcome;
  outcome.id = record.id;
  outcome.attempt = record.attempts;
  auto it = registry.find(record.type);
  if (it == registry.end()) {
    outcome.status = Status::NotFound(
        "no handler is registered for task type '" + record.type + "'");
    outcome.permanent = true;
    return outcome;
  }
  TaskContext context = TaskContextBuilder::For(record);
  try {
    outcome.status = it->second.handler(context);
  } catch (const std::exception& e) {
    outcome.status = Status::Aborted(std::string("handler threw: ") + e.what());
  } catch (...) {
    outcome.status = Status::Aborted("handler threw a non-standard exception");
  }
  return outcome;
}

}  // namespace spool::actors
