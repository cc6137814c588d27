// Encryption at rest: AES-256-GCM sealed values, HMAC-SHA256 lookup tags,
// and the key ring that key rotation needs.
//
// Sealed value, format version 1. Used for every value in the `tasks` and
// `corrupt` families of an encrypted store, and for the sealed lookup key in
// `meta`:
//
//   offset  size  field
//   0       4     magic and version: 'S' 'P' 'E' 0x81. Read as the
//                 little-endian root offset a FlatBuffers buffer starts
//                 with, this is >= 2^31, which no valid buffer has: a
//                 sealed value never passes for a plaintext record, nor a
//                 plaintext record for a sealed value.
//   4       4     key id, big-endian: which key sealed the value
//   8       12    nonce, fresh from the OpenSSL CSPRNG for every seal
//   20      n     AES-256-GCM ciphertext of the n plaintext bytes
//   20+n    16    GCM tag
//
// The associated data is the 8 header bytes followed by a context naming
// what the value is: "task" and the value's key (the task id, 8 bytes
// big-endian, its kind, and a failure's number; storage/keys.h) for a task's
// value, so that a value copied onto another task or kind (or into meta)
// fails to open, and a changed header fails too.
//
// Keys. A key is 32 random bytes (the "master key"). HKDF-SHA256 (RFC 5869,
// salt "spool/v1") derives from it, each with its own info string:
//   record key  "spool/v1/record-key"  32 bytes, the AES-256-GCM key
//   key id      "spool/v1/key-id"       4 bytes, written in each header
//   lookup key  "spool/v1/lookup-key"  32 bytes, see below
// A store's lookup key is the one derived from the key it was first
// encrypted with. It is kept in `meta`, sealed under the current key, and
// re-sealed when the current key changes, so the tags it makes (HMAC-SHA256
// of a group or dedup key, see LookupTagger) stay the same across rotations
// and no index needs rewriting.
//
// Thread safety: every class here is immutable after construction and safe
// to use from any thread.

#ifndef SPOOL_STORAGE_CRYPTO_H_
#define SPOOL_STORAGE_CRYPTO_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace spool::storage {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kNonceBytes = 12;
inline constexpr size_t kGcmTagBytes = 16;
inline constexpr size_t kSealHeaderBytes = 8;
// What sealing adds to a value's size.
inline constexpr size_t kSealOverhead =
    kSealHeaderBytes + kNonceBytes + kGcmTagBytes;
inline constexpr size_t kLookupTagBytes = 32;
// The domain bytes of lookup tags (LookupTagger::Tag).
inline constexpr char kGroupTagDomain = 'g';
inline constexpr char kDedupTagDomain = 'd';

// ---- Primitives (OpenSSL 3), exposed for known-answer tests ----

// AES-256-GCM with a 96-bit nonce and a 128-bit tag: appends ciphertext and
// tag to *out. InvalidArgument for a key or nonce of the wrong size; Aborted
// when OpenSSL fails.
Status AesGcmSeal(std::string_view key, std::string_view nonce,
                  std::string_view aad, std::string_view plaintext,
                  std::string* out);

// The inverse: checks the tag and appends the plaintext to *out.
// Corruption when authentication fails (nothing is appended then).
Status AesGcmOpen(std::string_view key, std::string_view nonce,
                  std::string_view aad, std::string_view sealed,
                  std::string* out);

// HMAC-SHA256 (RFC 2104), 32 bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

// HKDF-SHA256 (RFC 5869), extract then expand, `length` bytes.
Status HkdfSha256(std::string_view key, std::string_view salt,
                  std::string_view info, size_t length, std::string* out);

// ---- Sealed values ----

// Whether `stored` starts with the sealed-value magic (any version).
bool IsSealed(std::string_view stored);

// The key id of a sealed value. REQUIRES: IsSealed(stored) and at least
// kSealHeaderBytes bytes.
uint32_t SealedKeyId(std::string_view stored);

// A key id as messages and tools show it: 8 hex digits.
std::string KeyIdHex(uint32_t key_id);

// The context (associated data after the header) of the value stored under
// `tasks_key` (storage/keys.h: SpecKey, StateKey, FailureKey), in `tasks`
// or `corrupt`.
std::string ValueContext(std::string_view tasks_key);

// The current key, which seals, and earlier keys, which still open what they
// sealed (rotation).
class KeyRing {
 public:
  // Builds a ring from raw 32-byte keys. InvalidArgument naming the key
  // (`current_name`, or `previous_name`[i]) that has the wrong length or
  // repeats another.
  static Status Create(
      std::string_view current, const std::vector<std::string>& previous,
      std::shared_ptr<const KeyRing>* ring,
      std::string_view current_name = "encryption_key",
      std::string_view previous_name = "previous_encryption_keys");

  ~KeyRing();
  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;

  uint32_t current_id() const { return keys_.front().id; }
  // Whether the ring holds a key with this id.
  bool Has(uint32_t key_id) const;
  // "1a2b3c4d (current), 5e6f7a8b", for messages.
  std::string Describe() const;

  // Seals `plaintext` with the current key, bound to `context`, into
  // *sealed (replaced). Aborted only when the CSPRNG or OpenSSL fails.
  Status Seal(std::string_view context, std::string_view plaintext,
              std::string* sealed) const;

  // Opens a sealed value with the key named in its header, into *plaintext
  // (replaced), and sets *key_id (if not null). Corruption naming the cause:
  // not a sealed value, an unknown format version, a key id the ring does
  // not hold, or failed authentication (wrong key, altered bytes, or a
  // value copied from another context).
  Status Open(std::string_view context, std::string_view sealed,
              std::string* plaintext, uint32_t* key_id = nullptr) const;

  // The lookup key a store created with the current key uses.
  std::string DeriveLookupKey() const;

 private:
  struct Key {
    uint32_t id = 0;
    std::array<unsigned char, kKeyBytes> record_key{};
    std::array<unsigned char, kKeyBytes> lookup_key{};
  };
  KeyRing() = default;
  const Key* Find(uint32_t key_id) const;

  // keys_[0] is the current key.
  std::vector<Key> keys_;
  // Names this ring's keys in per-thread cipher caches.
  uint64_t serial_ = 0;
};

// Turns groups and dedup keys into the tags stored in index keys and queue
// values: HMAC-SHA256 under the store's lookup key, of a domain byte ('g'
// for a group, 'd' for a dedup key) followed by the value, so the same
// string as a group and as a dedup key gives unrelated tags.
class LookupTagger {
 public:
  // REQUIRES: key is kKeyBytes long.
  explicit LookupTagger(std::string_view key);
  ~LookupTagger();
  LookupTagger(const LookupTagger&) = delete;
  LookupTagger& operator=(const LookupTagger&) = delete;

  // kLookupTagBytes bytes.
  std::string Tag(char domain, std::string_view value) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- Key material ----

// 32 random bytes from the OpenSSL CSPRNG.
std::string NewRandomKey();

// Lower-case hex.
std::string ToHex(std::string_view bytes);

// Decodes exactly 64 hex digits (either case) into a 32-byte key.
// InvalidArgument naming `what`; the message never quotes the key text.
Status KeyFromHex(std::string_view hex, std::string_view what,
                  std::string* key);

// Parses a key file: one key per line as 64 hex digits, the first the
// current key, later ones previous keys; blank lines and lines starting with
// '#' are skipped, as is surrounding white space. InvalidArgument naming
// `what` and the line.
Status ParseKeyFile(std::string_view text, std::string_view what,
                    std::string* current, std::vector<std::string>* previous);

// Reads and parses the key file at `path`, which must be a regular file
// that group and others may not access (spool::ReadPrivateFile: opened,
// then judged). IOError when it cannot be read; InvalidArgument for a
// missing file, a mode with group or other bits (the error says to chmod
// 600) or bad contents; each names `what` and the path.
Status ReadKeyFile(const std::string& path, std::string_view what,
                   std::string* current, std::vector<std::string>* previous);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_CRYPTO_H_
