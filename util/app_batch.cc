// AppBatch's checks (include/spool/app_batch.h).

#include <spool/app_batch.h>

namespace spool {

Status AppBatch::Check(std::string_view key,
                       const std::string_view* value) const {
  if (key.empty()) return Status::InvalidArgument("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("key is " + std::to_string(key.size()) +
                                   " bytes; the limit is " +
                                   std::to_string(kMaxKeyBytes));
  }
  if (value != nullptr && value->size() > kMaxValueBytes) {
    return Status::InvalidArgument(
        "value of key '" + std::string(key.substr(0, 64)) + "' is " +
        std::to_string(value->size()) + " bytes; the limit is " +
        std::to_string(kMaxValueBytes));
  }
  if (writes_.size() >= kMaxWrites) {
    return Status::InvalidArgument("the batch holds " +
                                   std::to_string(kMaxWrites) +
                                   " writes already, the most it may hold");
  }
  return Status::OK();
}

Status AppBatch::Put(std::string_view key, std::string_view value) {
  Status s = Check(key, &value);
  if (s.ok()) writes_.push_back({std::string(key), std::string(value)});
  return s;
}

Status AppBatch::Delete(std::string_view key) {
  Status s = Check(key, nullptr);
  if (s.ok()) writes_.push_back({std::string(key), std::nullopt});
  return s;
}

}  // namespace spool
