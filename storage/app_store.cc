// The application key space of TaskStore (spool/app_batch.h): the `app`
// family's reads, and the sealing of its values in an encrypted store.

#include <string>

#include "storage/crypto.h"
#include "storage/task_store.h"
#include "storage/task_store_internal.h"

namespace spool::storage {
namespace {

// What an application value is sealed for: bound to its key, and apart
// from every task value (whose contexts start with "task").
std::string AppContext(std::string_view key) {
  std::string context = "app";
  context.append(key.data(), key.size());
  return context;
}

std::string AppKeyName(std::string_view key) {
  constexpr size_t kShown = 64;
  std::string name = "application key '" + std::string(key.substr(0, kShown));
  if (key.size() > kShown) name += "...";
  return name + "'";
}

}  // namespace

Status TaskStore::StoredAppValue(std::string_view key, std::string_view plain,
                                 std::string* stored) const {
  if (!encrypted()) {
    stored->assign(plain.data(), plain.size());
    return Status::OK();
  }
  Status s = options_.keys->Seal(AppContext(key), plain, stored);
  return s.ok() ? s : s.WithContext("sealing the value of " + AppKeyName(key));
}

Status TaskStore::OpenAppValue(std::string_view key, std::string* bytes) const {
  // Application values are any bytes: in a plaintext store none is taken
  // for a sealed one, however it starts.
  if (!encrypted()) return Status::OK();
  if (!IsSealed(*bytes)) {
    if (options_.accept_plaintext) return Status::OK();
    return Status::Corruption("the value of " + AppKeyName(key) +
                              " is stored in plaintext in an encrypted store, "
                              "and plaintext values are not accepted");
  }
  Status s = options_.keys->Open(AppContext(key), *bytes, bytes);
  if (!s.ok()) {
    return Status::Corruption("the value of " + AppKeyName(key) +
                              " cannot be decrypted: " + s.message());
  }
  return Status::OK();
}

Status TaskStore::ReadView::GetAppValue(std::string_view key,
                                        std::string* value) const {
  if (!open_) return StoreClosed(store_->options_.path);
  if (!store_->HasFamily(ColumnFamily::kApp)) {
    return Status::NotFound(AppKeyName(key));
  }
  Status s = store_->GetEntryLocked(ColumnFamily::kApp, key, value, snapshot_);
  if (s.IsNotFound()) return Status::NotFound(AppKeyName(key));
  if (!s.ok()) return s;
  return store_->OpenAppValue(key, value);
}

Status TaskStore::ReadView::ScanAppValues(const AppScan& scan,
                                          std::vector<AppEntry>* entries,
                                          bool* more) const {
  *more = false;
  if (!open_) return StoreClosed(store_->options_.path);
  if (!store_->HasFamily(ColumnFamily::kApp)) return Status::OK();
  // The first key after start_after is start_after followed by a zero byte.
  std::string start;
  if (!scan.start_after.empty()) {
    start = scan.start_after;
    start.push_back('\0');
  }
  Status opened;
  Status s = store_->ScanLocked(
      ColumnFamily::kApp, scan.prefix, start,
      [&](std::string_view key, std::string_view value) {
        if (entries->size() == scan.limit) {
          *more = true;
          return false;
        }
        AppEntry entry{std::string(key), std::string(value)};
        opened = store_->OpenAppValue(entry.key, &entry.value);
        if (!opened.ok()) return false;
        entries->push_back(std::move(entry));
        return true;
      },
      snapshot_);
  return s.ok() ? opened : s;
}

}  // namespace spool::storage
