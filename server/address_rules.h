// Which network addresses http.post refuses to connect to.
//
// A webhook URL comes from a client (the task's payload), and the server
// that posts it usually sits inside a network the client cannot reach: a
// URL naming a loopback, link-local (the cloud metadata service at
// 169.254.169.254), private or otherwise special address would let the
// client make spoold talk to what sits behind it (server-side request
// forgery). So the handler judges every address libcurl is about to connect
// to, after resolution, and refuses the special-purpose ranges below unless
// an allow-list entry names that very address as its host.
//
// Thread safety: free functions on values.

#ifndef SPOOL_SERVER_ADDRESS_RULES_H_
#define SPOOL_SERVER_ADDRESS_RULES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>

namespace spool::http {

// An IPv4 or IPv6 address, its bytes in network order.
struct IpAddress {
  // AF_INET (4 bytes used) or AF_INET6 (16). Default: AF_INET.
  int family = AF_INET;
  std::array<uint8_t, 16> bytes{};

  bool operator==(const IpAddress& other) const {
    return family == other.family && bytes == other.bytes;
  }
  bool operator!=(const IpAddress& other) const { return !(*this == other); }
};

// `text` as an address literal: dotted-quad IPv4 ("127.0.0.1") or IPv6
// ("::1", also in brackets, "[::1]", as URLs write it). nullopt for anything
// else, host names included.
std::optional<IpAddress> ParseIpLiteral(std::string_view text);

// The address of a socket address of `length` bytes; nullopt unless it is
// AF_INET or AF_INET6.
std::optional<IpAddress> IpAddressOf(const sockaddr* address, size_t length);

// The canonical text of `address`: "127.0.0.1", "::1" (inet_ntop's form).
std::string ToString(const IpAddress& address);

// Whether `address` is a loopback address: 127.0.0.0/8 or ::1. (An
// IPv4-mapped ::ffff:127.0.0.1 is not: no listener binds to it.)
bool IsLoopback(const IpAddress& address);

// Why http.post does not connect to `address` on its own: "" for an address
// outside every special-purpose range, else the range, e.g. "a loopback
// address (127.0.0.0/8)". Refused: unspecified (0.0.0.0/8, ::), loopback
// (127.0.0.0/8, ::1), link-local (169.254.0.0/16, fe80::/10), private
// (10/8, 172.16/12, 192.168/16), carrier-grade NAT (100.64.0.0/10),
// unique-local (fc00::/7), site-local (fec0::/10), multicast (224.0.0.0/4,
// ff00::/8), broadcast (255.255.255.255) and the reserved 192.0.0.0/24,
// 198.18.0.0/15 and 240.0.0.0/4. An IPv6 address that carries an IPv4 one
// (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96) is
// judged by the IPv4 address it carries.
std::string SpecialRangeOf(const IpAddress& address);

// Whether http.post may connect to `address`: "" when it may (an address
// outside the special ranges, or the one `named` by the allow-list entry
// the URL matched), else "ADDRESS, WHY", e.g.
// "127.0.0.1, a loopback address (127.0.0.0/8)".
std::string RefusalOf(const IpAddress& address,
                      const std::optional<IpAddress>& named);

}  // namespace spool::http

#endif  // SPOOL_SERVER_ADDRESS_RULES_H_
