#include "server/address_rules.h"

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>

namespace spool::http {
namespace {

// A special-purpose range: `bits` leading bits of `prefix`.
struct Range {
  std::array<uint8_t, 16> prefix;
  int bits;
  const char* why;
};

// IPv4 ranges, most specific first (the broadcast address before 240/4).
const Range kIpv4Ranges[] = {
    {{255, 255, 255, 255}, 32, "the broadcast address (255.255.255.255)"},
    {{0}, 8, "an unspecified address (0.0.0.0/8, \"this network\")"},
    {{10}, 8, "a private address (10.0.0.0/8)"},
    {{100, 64}, 10, "a carrier-grade NAT address (100.64.0.0/10)"},
    {{127}, 8, "a loopback address (127.0.0.0/8)"},
    {{169, 254},
     16,
     "a link-local address (169.254.0.0/16, where cloud metadata services "
     "answer)"},
    {{172, 16}, 12, "a private address (172.16.0.0/12)"},
    {{192, 0, 0}, 24, "a reserved address (192.0.0.0/24)"},
    {{192, 168}, 16, "a private address (192.168.0.0/16)"},
    {{198, 18}, 15, "a reserved address (198.18.0.0/15)"},
    {{224}, 4, "a multicast address (224.0.0.0/4)"},
    {{240}, 4, "a reserved address (240.0.0.0/4)"},
};

// IPv6 ranges of their own (the forms that carry IPv4 are handled first).
const Range kIpv6Ranges[] = {
    {{0xfc}, 7, "a unique-local address (fc00::/7)"},
    {{0xfe, 0x80}, 10, "a link-local address (fe80::/10)"},
    {{0xfe, 0xc0}, 10, "a site-local address (fec0::/10)"},
    {{0xff}, 8, "a multicast address (ff00::/8)"},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01},
     48,
     "a local-use NAT64 address (64:ff9b:1::/48)"},
};

bool InRange(const uint8_t* bytes, const Range& range) {
  int whole = range.bits / 8;
  if (std::memcmp(bytes, range.prefix.data(), static_cast<size_t>(whole)) !=
      0) {
    return false;
  }
  int rest = range.bits % 8;
  if (rest == 0) return true;
  auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (bytes[whole] & mask) == (range.prefix[whole] & mask);
}

std::string Ipv4Why(const uint8_t* bytes) {
  for (const Range& range : kIpv4Ranges) {
    if (InRange(bytes, range)) return range.why;
  }
  return "";
}

bool Zero(const uint8_t* bytes, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

// What an IPv6 address that carries an IPv4 one in its last 4 bytes is
// judged by, or nullptr when it carries none.
const char* CarrierOf(const uint8_t* bytes) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0,
                                     0, 0,    0,    0,    0, 0};
  if (std::memcmp(bytes, kMapped, 12) == 0) return "an IPv4-mapped form of ";
  if (std::memcmp(bytes, kNat64, 12) == 0) return "a NAT64 form of ";
  if (Zero(bytes, 12)) return "an IPv4-compatible form of ";
  return nullptr;
}

}  // namespace

std::optional<IpAddress> ParseIpLiteral(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  std::string copy(text);
  IpAddress address;
  if (::inet_pton(AF_INET, copy.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET;
    return address;
  }
  if (::inet_pton(AF_INET6, copy.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET6;
    return address;
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddressOf(const sockaddr* address, size_t length) {
  IpAddress out;
  if (address == nullptr) return std::nullopt;
  if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    sockaddr_in in{};
    std::memcpy(&in, address, sizeof in);
    out.family = AF_INET;
    std::memcpy(out.bytes.data(), &in.sin_addr, 4);
    return out;
  }
  if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, address, sizeof in6);
    out.family = AF_INET6;
    std::memcpy(out.bytes.data(), &in6.sin6_addr, 16);
    return out;
  }
  return std::nullopt;
}

std::string ToString(const IpAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(address.family, address.bytes.data(), text, sizeof text) ==
      nullptr) {
    return "?";
  }
  return text;
}

bool IsLoopback(const IpAddress& address) {
  const uint8_t* bytes = address.bytes.data();
  if (address.family == AF_INET) return bytes[0] == 127;
  return Zero(bytes, 15) && bytes[15] == 1;
}

std::string SpecialRangeOf(const IpAddress& address) {
  const uint8_t* bytes = address.bytes.data();
  if (address.family == AF_INET) return Ipv4Why(bytes);
  if (Zero(bytes, 16)) return "an unspecified address (::)";
  if (Zero(bytes, 15) && bytes[15] == 1) return "a loopback address (::1)";
  if (const char* carrier = CarrierOf(bytes)) {
    std::string why = Ipv4Why(bytes + 12);
    return why.empty() ? why : carrier + why;
  }
  for (const Range& range : kIpv6Ranges) {
    if (InRange(bytes, range)) return range.why;
  }
  return "";
}

std::string RefusalOf(const IpAddress& address,
                      const std::optional<IpAddress>& named) {
  if (named && *named == address) return "";
  std::string why = SpecialRangeOf(address);
  return why.empty() ? why : ToString(address) + ", " + why;
}

}  // namespace spool::http
