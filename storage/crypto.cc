#include "storage/crypto.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include <spool/secret_file.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "storage/keys.h"

namespace spool::storage {
namespace {

constexpr unsigned char kMagic[3] = {'S', 'P', 'E'};
constexpr unsigned char kVersion1 = 0x81;

constexpr std::string_view kKdfSalt = "spool/v1";
constexpr std::string_view kRecordKeyInfo = "spool/v1/record-key";
constexpr std::string_view kKeyIdInfo = "spool/v1/key-id";
constexpr std::string_view kLookupKeyInfo = "spool/v1/lookup-key";

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// Algorithms are fetched once: an implicit fetch on every call costs a
// lookup under a lock in OpenSSL 3.
EVP_CIPHER* Aes256Gcm() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

EVP_MAC* Hmac() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

// Keys are identified, for the per-thread caches below, by a number no
// other key ring or tagger ever gets (an address could be reused).
std::atomic<uint64_t> next_serial{1};

// A cipher context kept keyed between calls on one thread: setting up the
// AES key schedule and GHASH key costs more than sealing a small record, so
// a call with the same key as the last one only sets the nonce.
struct KeyedCipherCtx {
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx{EVP_CIPHER_CTX_new()};
  // The key it holds: (key serial, key id); 0 for none.
  uint64_t serial = 0;
  uint32_t key_id = 0;
};

// One for sealing and one for opening, per thread.
KeyedCipherCtx& ThreadCipherCtx(bool seal) {
  thread_local KeyedCipherCtx sealing;
  thread_local KeyedCipherCtx opening;
  return seal ? sealing : opening;
}

// The key a call uses: its bytes, and its identity for the cache (serial 0:
// not cached).
struct GcmKey {
  const unsigned char* bytes;
  uint64_t serial;
  uint32_t key_id;
};

// Readies the thread's context for `key` and `nonce`.
EVP_CIPHER_CTX* InitCipher(bool seal, const GcmKey& key,
                           const unsigned char* nonce) {
  KeyedCipherCtx& cached = ThreadCipherCtx(seal);
  EVP_CIPHER_CTX* ctx = cached.ctx.get();
  if (ctx == nullptr || Aes256Gcm() == nullptr) return nullptr;
  bool keyed = key.serial != 0 && cached.serial == key.serial &&
               cached.key_id == key.key_id;
  // Invalid until this init succeeds.
  cached.serial = 0;
  int ok =
      seal ? EVP_EncryptInit_ex2(ctx, keyed ? nullptr : Aes256Gcm(),
                                 keyed ? nullptr : key.bytes, nonce, nullptr)
           : EVP_DecryptInit_ex2(ctx, keyed ? nullptr : Aes256Gcm(),
                                 keyed ? nullptr : key.bytes, nonce, nullptr);
  if (ok != 1) return nullptr;
  cached.serial = key.serial;
  cached.key_id = key.key_id;
  return ctx;
}

// Seals into `out` (ciphertext then tag). REQUIRES: out has room for
// plaintext.size() + kGcmTagBytes bytes; the key and nonce sizes are right.
bool GcmSeal(const GcmKey& key, const unsigned char* nonce,
             std::string_view aad1, std::string_view aad2,
             std::string_view plaintext, unsigned char* out) {
  EVP_CIPHER_CTX* ctx = InitCipher(/*seal=*/true, key, nonce);
  if (ctx == nullptr) return false;
  int len = 0;
  for (std::string_view aad : {aad1, aad2}) {
    if (!aad.empty() && EVP_EncryptUpdate(ctx, nullptr, &len, Bytes(aad),
                                          static_cast<int>(aad.size())) != 1) {
      return false;
    }
  }
  int written = 0;
  if (!plaintext.empty()) {
    if (EVP_EncryptUpdate(ctx, out, &len, Bytes(plaintext),
                          static_cast<int>(plaintext.size())) != 1) {
      return false;
    }
    written = len;
  }
  if (EVP_EncryptFinal_ex(ctx, out + written, &len) != 1) return false;
  written += len;
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kGcmTagBytes,
                             out + written) == 1;
}

// Opens `sealed` (ciphertext then tag) into `out`. False when the tag does
// not match or OpenSSL fails. REQUIRES: sealed has at least kGcmTagBytes
// bytes; out has room for the ciphertext.
bool GcmOpen(const GcmKey& key, const unsigned char* nonce,
             std::string_view aad1, std::string_view aad2,
             std::string_view sealed, unsigned char* out) {
  EVP_CIPHER_CTX* ctx = InitCipher(/*seal=*/false, key, nonce);
  if (ctx == nullptr) return false;
  std::string_view ciphertext = sealed.substr(0, sealed.size() - kGcmTagBytes);
  std::string_view tag = sealed.substr(ciphertext.size());
  int len = 0;
  for (std::string_view aad : {aad1, aad2}) {
    if (!aad.empty() && EVP_DecryptUpdate(ctx, nullptr, &len, Bytes(aad),
                                          static_cast<int>(aad.size())) != 1) {
      return false;
    }
  }
  int written = 0;
  if (!ciphertext.empty()) {
    if (EVP_DecryptUpdate(ctx, out, &len, Bytes(ciphertext),
                          static_cast<int>(ciphertext.size())) != 1) {
      return false;
    }
    written = len;
  }
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, kGcmTagBytes,
                          const_cast<unsigned char*>(Bytes(tag))) != 1) {
    return false;
  }
  return EVP_DecryptFinal_ex(ctx, out + written, &len) == 1;
}

// Fresh random nonces. Every nonce is 96 bits straight from the OpenSSL
// CSPRNG and handed out once; they are drawn 256 at a time, because a
// RAND_bytes call costs far more than the bytes (about 1.4 us for 12 bytes,
// 12 ns a nonce in bulk, on the project machine). A forked child discards
// what its parent drew, so that the two never share a nonce.
bool NextNonce(unsigned char* nonce) {
  constexpr size_t kNonces = 256;
  struct Pool {
    unsigned char bytes[kNonces * kNonceBytes];
    size_t next = kNonces;
    pid_t pid = 0;
    ~Pool() { OPENSSL_cleanse(bytes, sizeof(bytes)); }
  };
  thread_local Pool pool;
  pid_t pid = ::getpid();
  if (pool.next == kNonces || pool.pid != pid) {
    if (RAND_bytes(pool.bytes, sizeof(pool.bytes)) != 1) return false;
    pool.next = 0;
    pool.pid = pid;
  }
  unsigned char* slot = pool.bytes + pool.next * kNonceBytes;
  std::memcpy(nonce, slot, kNonceBytes);
  OPENSSL_cleanse(slot, kNonceBytes);
  ++pool.next;
  return true;
}

Status OpenSslError(std::string_view what) {
  return Status::Aborted("OpenSSL failed in " + std::string(what));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view Trim(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Status AesGcmSeal(std::string_view key, std::string_view nonce,
                  std::string_view aad, std::string_view plaintext,
                  std::string* out) {
  if (key.size() != kKeyBytes || nonce.size() != kNonceBytes) {
    return Status::InvalidArgument(
        "AES-256-GCM needs a 32-byte key and a "
        "12-byte nonce");
  }
  size_t start = out->size();
  out->resize(start + plaintext.size() + kGcmTagBytes);
  if (!GcmSeal({Bytes(key), 0, 0}, Bytes(nonce), aad, {}, plaintext,
               reinterpret_cast<unsigned char*>(&(*out)[start]))) {
    out->resize(start);
    return OpenSslError("AES-256-GCM encryption");
  }
  return Status::OK();
}

Status AesGcmOpen(std::string_view key, std::string_view nonce,
                  std::string_view aad, std::string_view sealed,
                  std::string* out) {
  if (key.size() != kKeyBytes || nonce.size() != kNonceBytes) {
    return Status::InvalidArgument(
        "AES-256-GCM needs a 32-byte key and a "
        "12-byte nonce");
  }
  if (sealed.size() < kGcmTagBytes) {
    return Status::Corruption("AES-256-GCM input is shorter than its tag");
  }
  size_t start = out->size();
  out->resize(start + sealed.size() - kGcmTagBytes);
  if (!GcmOpen({Bytes(key), 0, 0}, Bytes(nonce), aad, {}, sealed,
               reinterpret_cast<unsigned char*>(out->data() + start))) {
    out->resize(start);
    return Status::Corruption("AES-256-GCM authentication failed");
  }
  return Status::OK();
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[32];
  size_t out_len = 0;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(Hmac());
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  bool ok = ctx != nullptr &&
            EVP_MAC_init(ctx, Bytes(key), key.size(), params) == 1 &&
            EVP_MAC_update(ctx, Bytes(data), data.size()) == 1 &&
            EVP_MAC_final(ctx, out, &out_len, sizeof(out)) == 1;
  EVP_MAC_CTX_free(ctx);
  return ok ? std::string(reinterpret_cast<char*>(out), out_len)
            : std::string();
}

Status HkdfSha256(std::string_view key, std::string_view salt,
                  std::string_view info, size_t length, std::string* out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return OpenSslError("fetching HKDF");
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return OpenSslError("creating an HKDF context");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_KEY, const_cast<char*>(key.data()), key.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()), salt.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size()),
      OSSL_PARAM_construct_end()};
  out->assign(length, '\0');
  bool ok = EVP_KDF_derive(ctx, reinterpret_cast<unsigned char*>(out->data()),
                           length, params) == 1;
  EVP_KDF_CTX_free(ctx);
  if (!ok) {
    out->clear();
    return OpenSslError("HKDF");
  }
  return Status::OK();
}

bool IsSealed(std::string_view stored) {
  return stored.size() >= 4 && std::memcmp(stored.data(), kMagic, 3) == 0 &&
         (static_cast<unsigned char>(stored[3]) & 0x80) != 0;
}

uint32_t SealedKeyId(std::string_view stored) {
  return GetBigEndian32(stored.data() + 4);
}

std::string KeyIdHex(uint32_t key_id) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", key_id);
  return text;
}

std::string ValueContext(std::string_view tasks_key) {
  std::string context = "task";
  context.append(tasks_key.data(), tasks_key.size());
  return context;
}

// ---- KeyRing ----

Status KeyRing::Create(std::string_view current,
                       const std::vector<std::string>& previous,
                       std::shared_ptr<const KeyRing>* ring,
                       std::string_view current_name,
                       std::string_view previous_name) {
  std::shared_ptr<KeyRing> result(new KeyRing());
  result->serial_ = next_serial.fetch_add(1);
  for (size_t i = 0; i <= previous.size(); ++i) {
    std::string_view key = i == 0 ? current : std::string_view(previous[i - 1]);
    std::string name =
        i == 0 ? std::string(current_name)
               : std::string(previous_name) + "[" + std::to_string(i - 1) + "]";
    if (key.size() != kKeyBytes) {
      return Status::InvalidArgument(
          name + " is " + std::to_string(key.size()) +
          " bytes; an AES-256 key is exactly 32 bytes");
    }
    Key derived;
    std::string bytes;
    Status s = HkdfSha256(key, kKdfSalt, kRecordKeyInfo, kKeyBytes, &bytes);
    if (!s.ok()) return s;
    std::memcpy(derived.record_key.data(), bytes.data(), kKeyBytes);
    s = HkdfSha256(key, kKdfSalt, kLookupKeyInfo, kKeyBytes, &bytes);
    if (!s.ok()) return s;
    std::memcpy(derived.lookup_key.data(), bytes.data(), kKeyBytes);
    OPENSSL_cleanse(bytes.data(), bytes.size());
    s = HkdfSha256(key, kKdfSalt, kKeyIdInfo, 4, &bytes);
    if (!s.ok()) return s;
    derived.id = GetBigEndian32(bytes.data());
    for (size_t j = 0; j < result->keys_.size(); ++j) {
      if (result->keys_[j].id == derived.id) {
        std::string other = j == 0 ? std::string(current_name)
                                   : std::string(previous_name) + "[" +
                                         std::to_string(j - 1) + "]";
        return Status::InvalidArgument(name + " is the same key as " + other);
      }
    }
    result->keys_.push_back(derived);
  }
  *ring = std::move(result);
  return Status::OK();
}

KeyRing::~KeyRing() {
  for (Key& key : keys_) {
    OPENSSL_cleanse(key.record_key.data(), key.record_key.size());
    OPENSSL_cleanse(key.lookup_key.data(), key.lookup_key.size());
  }
}

const KeyRing::Key* KeyRing::Find(uint32_t key_id) const {
  for (const Key& key : keys_) {
    if (key.id == key_id) return &key;
  }
  return nullptr;
}

bool KeyRing::Has(uint32_t key_id) const { return Find(key_id) != nullptr; }

std::string KeyRing::Describe() const {
  std::string out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (i > 0) out += ", ";
    out += KeyIdHex(keys_[i].id);
    if (i == 0) out += " (current)";
  }
  return out;
}

Status KeyRing::Seal(std::string_view context, std::string_view plaintext,
                     std::string* sealed) const {
  const Key& key = keys_.front();
  sealed->resize(kSealOverhead + plaintext.size());
  char* out = sealed->data();
  std::memcpy(out, kMagic, 3);
  out[3] = static_cast<char>(kVersion1);
  for (int i = 0; i < 4; ++i) {
    out[4 + i] = static_cast<char>((key.id >> (24 - 8 * i)) & 0xff);
  }
  auto* nonce = reinterpret_cast<unsigned char*>(out + kSealHeaderBytes);
  if (!NextNonce(nonce)) {
    sealed->clear();
    return OpenSslError("drawing a random nonce");
  }
  if (!GcmSeal({key.record_key.data(), serial_, key.id}, nonce,
               std::string_view(out, kSealHeaderBytes), context, plaintext,
               nonce + kNonceBytes)) {
    sealed->clear();
    return OpenSslError("AES-256-GCM encryption");
  }
  return Status::OK();
}

Status KeyRing::Open(std::string_view context, std::string_view sealed,
                     std::string* plaintext, uint32_t* key_id) const {
  if (!IsSealed(sealed) || sealed.size() < kSealOverhead) {
    return Status::Corruption("is not a sealed value (" +
                              std::to_string(sealed.size()) + " bytes)");
  }
  if (static_cast<unsigned char>(sealed[3]) != kVersion1) {
    return Status::Corruption(
        "is sealed in format version " +
        std::to_string(static_cast<unsigned char>(sealed[3]) & 0x7f) +
        ", unknown to this spool");
  }
  uint32_t id = SealedKeyId(sealed);
  const Key* key = Find(id);
  if (key == nullptr) {
    return Status::Corruption(
        "is sealed with key id " + KeyIdHex(id) +
        ", which is not configured (configured: " + Describe() + ")");
  }
  const auto* nonce =
      reinterpret_cast<const unsigned char*>(sealed.data() + kSealHeaderBytes);
  std::string_view body = sealed.substr(kSealHeaderBytes + kNonceBytes);
  std::string out(body.size() - kGcmTagBytes, '\0');
  if (!GcmOpen({key->record_key.data(), serial_, key->id}, nonce,
               sealed.substr(0, kSealHeaderBytes), context, body,
               reinterpret_cast<unsigned char*>(out.data()))) {
    return Status::Corruption(
        "fails authentication with key id " + KeyIdHex(id) +
        ": its bytes were altered, or it was copied from another task");
  }
  *plaintext = std::move(out);
  if (key_id != nullptr) *key_id = id;
  return Status::OK();
}

std::string KeyRing::DeriveLookupKey() const {
  const auto& key = keys_.front().lookup_key;
  return std::string(reinterpret_cast<const char*>(key.data()), key.size());
}

// ---- LookupTagger ----

struct LookupTagger::State {
  uint64_t serial = 0;
  std::array<unsigned char, kKeyBytes> key{};
  ~State() { OPENSSL_cleanse(key.data(), key.size()); }
};

namespace {

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* ctx) const { EVP_MAC_CTX_free(ctx); }
};

// An HMAC context kept keyed between calls on one thread: re-initialising
// it without a key restarts it with the key it holds, which is far cheaper
// than keying (or copying) a context for every tag.
struct KeyedMacCtx {
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx;
  uint64_t serial = 0;
};

}  // namespace

LookupTagger::LookupTagger(std::string_view key)
    : state_(std::make_unique<State>()) {
  state_->serial = next_serial.fetch_add(1);
  std::memcpy(state_->key.data(), key.data(),
              std::min(key.size(), state_->key.size()));
}

LookupTagger::~LookupTagger() = default;

std::string LookupTagger::Tag(char domain, std::string_view value) const {
  thread_local KeyedMacCtx cached;
  unsigned char out[kLookupTagBytes];
  size_t out_len = 0;
  bool ok = true;
  if (!cached.ctx) cached.ctx.reset(EVP_MAC_CTX_new(Hmac()));
  EVP_MAC_CTX* ctx = cached.ctx.get();
  if (ctx == nullptr) {
    ok = false;
  } else if (cached.serial == state_->serial) {
    ok = EVP_MAC_init(ctx, nullptr, 0, nullptr) == 1;
  } else {
    cached.serial = 0;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end()};
    ok = EVP_MAC_init(ctx, state_->key.data(), state_->key.size(), params) == 1;
    if (ok) cached.serial = state_->serial;
  }
  unsigned char prefix = static_cast<unsigned char>(domain);
  ok = ok && EVP_MAC_update(ctx, &prefix, 1) == 1 &&
       EVP_MAC_update(ctx, Bytes(value), value.size()) == 1 &&
       EVP_MAC_final(ctx, out, &out_len, sizeof(out)) == 1 &&
       out_len == kLookupTagBytes;
  if (!ok) {
    // Cannot happen short of memory exhaustion inside OpenSSL. A tag that
    // is not a keyed hash would leak the value, so fail loudly instead.
    std::fprintf(stderr, "spool: OpenSSL failed to compute a lookup tag\n");
    std::abort();
  }
  return std::string(reinterpret_cast<char*>(out), out_len);
}

// ---- Key material ----

std::string NewRandomKey() {
  std::string key(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeyBytes) !=
      1) {
    std::fprintf(stderr, "spool: the OpenSSL CSPRNG failed\n");
    std::abort();
  }
  return key;
}

std::string ToHex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Status KeyFromHex(std::string_view hex, std::string_view what,
                  std::string* key) {
  if (hex.size() != 2 * kKeyBytes) {
    return Status::InvalidArgument(
        std::string(what) +
        ": expected 64 hex digits (a 32-byte AES-256 key), "
        "got " +
        std::to_string(hex.size()) + " characters");
  }
  std::string out(kKeyBytes, '\0');
  for (size_t i = 0; i < kKeyBytes; ++i) {
    int high = HexDigit(hex[2 * i]);
    int low = HexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      OPENSSL_cleanse(out.data(), out.size());
      return Status::InvalidArgument(
          std::string(what) +
          ": expected 64 hex digits, found a character "
          "that is not one at position " +
          std::to_string(2 * i + (high < 0 ? 1 : 2)));
    }
    out[i] = static_cast<char>(high * 16 + low);
  }
  *key = std::move(out);
  return Status::OK();
}

Status ParseKeyFile(std::string_view text, std::string_view what,
                    std::string* current, std::vector<std::string>* previous) {
  std::vector<std::string> keys;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_number;
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    std::string key;
    Status s = KeyFromHex(
        line, std::string(what) + ": line " + std::to_string(line_number),
        &key);
    if (!s.ok()) return s;
    keys.push_back(std::move(key));
  }
  if (keys.empty()) {
    return Status::InvalidArgument(std::string(what) +
                                   ": holds no key (expected 64 hex digits "
                                   "on a line)");
  }
  *current = std::move(keys.front());
  previous->assign(std::make_move_iterator(keys.begin() + 1),
                   std::make_move_iterator(keys.end()));
  return Status::OK();
}

Status ReadKeyFile(const std::string& path, std::string_view what,
                   std::string* current, std::vector<std::string>* previous) {
  std::string where = std::string(what) + " " + path;
  // Opened, then judged by what was opened (spool/secret_file.h): a key
  // file that group or others may read is refused, chmod 600 named.
  std::string text;
  Status s = ReadPrivateFile(std::string(what), path, &text);
  if (s.IsNotFound()) return Status::InvalidArgument(where + ": no such file");
  if (s.ok()) s = ParseKeyFile(text, where, current, previous);
  OPENSSL_cleanse(text.data(), text.size());
  return s;
}

}  // namespace spool::storage
