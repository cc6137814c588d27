#include "actors/remote_protocol.h"

#include <cstdint>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "actors/messages.h"

namespace spool::actors {

namespace {

std::string Hex(const unsigned char* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

// Appends `field` with its length in front (8 bytes, little-endian).
void AppendField(std::string* out, std::string_view field) {
  uint64_t n = field.size();
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(n >> (8 * i)));
  out->append(field);
}

std::string HmacHex(const std::string& secret, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  size_t mac_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(),
                secret.size(),
                reinterpret_cast<const unsigned char*>(data.data()),
                data.size(), mac, sizeof mac, &mac_len) == nullptr) {
    return std::string();  // matches nothing (SecretsMatch)
  }
  return Hex(mac, mac_len);
}

bool IsLowerHex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string NewNonce() {
  unsigned char bytes[kNonceHexBytes / 2];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return std::string();
  return Hex(bytes, sizeof bytes);
}

std::string DoorProof(const std::string& secret, std::string_view worker_nonce,
                      std::string_view door_nonce) {
  std::string data;
  AppendField(&data, "spool-door");
  AppendField(&data, worker_nonce);
  AppendField(&data, door_nonce);
  return HmacHex(secret, data);
}

std::string WorkerProof(const std::string& secret, const RemoteHello& hello) {
  std::string data;
  AppendField(&data, "spool-worker");
  AppendField(&data, hello.door_nonce);
  AppendField(&data, hello.worker_nonce);
  AppendField(&data, hello.node);
  AppendField(&data, std::to_string(hello.types.size()));
  for (const std::string& type : hello.types) AppendField(&data, type);
  AppendField(&data, std::to_string(hello.concurrency));
  return HmacHex(secret, data);
}

bool SecretsMatch(std::string_view a, std::string_view b) {
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0 && !b.empty();
}

Status CheckHelloShape(const RemoteHello& hello) {
  if (hello.door_nonce.size() != kNonceHexBytes ||
      hello.worker_nonce.size() != kNonceHexBytes ||
      !IsLowerHex(hello.door_nonce) || !IsLowerHex(hello.worker_nonce)) {
    return Status::InvalidArgument(
        "refused: the hello's nonces must be 64 hex digits each (ask for a "
        "challenge first)");
  }
  if (hello.proof.size() != kProofHexBytes) {
    return Status::InvalidArgument(
        "refused: the hello's proof must be 64 hex "
        "digits");
  }
  if (hello.node.size() > kMaxNodeNameBytes) {
    return Status::InvalidArgument(
        "refused: the node name is longer than 256 bytes");
  }
  if (hello.types.empty() || hello.types.size() > kMaxHelloTypes) {
    return Status::InvalidArgument(
        "refused: a hello names 1 to 1024 task types");
  }
  for (const std::string& type : hello.types) {
    if (type.empty() || type.size() > kMaxHelloTypeBytes) {
      return Status::InvalidArgument(
          "refused: a task type in the hello is empty or longer than 256 "
          "bytes");
    }
  }
  if (hello.concurrency < 1 || hello.concurrency > 4096) {
    return Status::InvalidArgument("refused: concurrency must be in [1, 4096]");
  }
  return Status::OK();
}

}  // namespace spool::actors
