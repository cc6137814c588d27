// Whether a listen address stays on this machine.

#ifndef SPOOL_UTIL_LOOPBACK_H_
#define SPOOL_UTIL_LOOPBACK_H_

#include <arpa/inet.h>
#include <string>
#include <string_view>

namespace spool {

// Whether HOST (of "HOST:PORT"; IPv6 with or without brackets) is a
// loopback address: 127.0.0.0/8, ::1 or "localhost". Empty (every
// interface) and any other name are not: a name may resolve anywhere.
inline bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace spool

#endif  // SPOOL_UTIL_LOOPBACK_H_
