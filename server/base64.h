// Base64 (RFC 4648, the standard alphabet, with padding) for what spoold
// reads and writes: task payloads given as payload_base64, and etcd's JSON
// API, which carries every key and value in it.

#ifndef SPOOL_SERVER_BASE64_H_
#define SPOOL_SERVER_BASE64_H_

#include <string>
#include <string_view>

namespace spool::http {

// `bytes` in base64, padded.
std::string EncodeBase64(std::string_view bytes);

// Decodes `text` into *bytes. False (and *bytes unspecified) when `text`
// holds a character outside the alphabet, data after padding, or a
// dangling sixth of a byte. Padding may be left off.
bool DecodeBase64(std::string_view text, std::string* bytes);

}  // namespace spool::http

#endif  // SPOOL_SERVER_BASE64_H_
