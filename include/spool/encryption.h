// Encryption at rest: key helpers, and the results of Runtime::ReencryptAll
// and Runtime::ListSetAside.
//
// With a key (Options::encryption_key or storage.encryption_key_file), every
// task record is sealed with AES-256-GCM before it reaches RocksDB, bound to
// its task id, with a fresh random nonce per write. Groups and dedup keys,
// which indexes need, appear there only as HMAC-SHA256 tags. Task types,
// ids, statuses, priorities, times, dependencies and counts are not
// encrypted: the queue orders and counts by them.
//
// Rotation: make the new key current and keep the old one among the
// previous keys (in a key file: put the new key on the first line); call
// Runtime::ReencryptAll; once it reports nothing unreadable, drop the old
// key.
//
// A record that cannot be decrypted (its key is gone, or it was altered) is
// set aside when the queue meets it, never deleted; the queue goes on.
// GetTask names it; ListSetAside lists it; once its key is configured again,
// Release(id) returns it to the queue.

#ifndef SPOOL_INCLUDE_ENCRYPTION_H_
#define SPOOL_INCLUDE_ENCRYPTION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

// The size of a key: AES-256.
inline constexpr size_t kEncryptionKeyBytes = 32;

// A new key: 32 bytes from OpenSSL's CSPRNG. Keep it outside the storage
// directory (a secrets manager, or a key file only the service can read).
std::string GenerateEncryptionKey();

// The key-file form of a key: 64 lower-case hex digits.
std::string EncryptionKeyToHex(std::string_view key);

// The id (8 hex digits) that names `key` in sealed records and in messages;
// it reveals nothing of the key. InvalidArgument unless key is 32 bytes.
Result<std::string> EncryptionKeyId(std::string_view key);

struct ReencryptOptions {
  // Records examined per writer command; other work commits between them.
  // Default: 256.
  size_t batch_size = 256;
  // Compact the storage afterwards, so that the values replaced (sealed
  // with an earlier key, or in plaintext) are dropped from the table files
  // rather than left until compaction gets to them. Default: true.
  bool compact = true;
};

struct ReencryptResult {
  // Task records sealed again with the current key, plaintext ones
  // included.
  uint64_t reencrypted = 0;
  // Set-aside records sealed again with the current key.
  uint64_t set_aside_resealed = 0;
  // Records no configured key opens (in the queue or set aside), left as
  // they are. While this is not empty, an earlier key is still needed.
  std::vector<TaskId> unreadable;
};

// A task set aside because its record could not be read.
struct SetAsideTask {
  TaskId id = 0;
  // Why it cannot be read, or OK when it can be now (e.g. its key is
  // configured again): Release(id) then returns it to the queue.
  Status reason;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_ENCRYPTION_H_
