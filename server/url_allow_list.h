// UrlAllowList: which URLs the http.post handler may send requests to.
//
// Each pattern is matched against a URL in canonical form,
// scheme://host:port/path[?query] (libcurl's URL parser: scheme and host
// lower-cased, IPv4 forms such as 2130706433 or 0x7f.1 written as
// 127.0.0.1, IPv6 in inet_ntop's form, the default port written out).
// `**` matches any run of characters. `*` matches any run without `/`, and
// in the host:port part also without `.` or `:`: one DNS label (or the
// port): "https://*.example.com:443/**" matches
// "https://a.example.com:443/x" but not "https://a.b.example.com:443/x".
// Every other character matches itself. A URL with user info ("http://a@b/") or
// a fragment never matches, and neither does one longer than kMaxUrlBytes.
//
// Matching names the URL only; which address it reaches is judged when
// libcurl connects (server/address_rules.h): Check says which address, if
// any, the matching entries name as their host, since only such an entry
// allows a loopback, private or other special address.
//
// Thread safety: const methods may be called concurrently.

#ifndef SPOOL_SERVER_URL_ALLOW_LIST_H_
#define SPOOL_SERVER_URL_ALLOW_LIST_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>

#include "server/address_rules.h"

namespace spool::http {

// The longest URL http.post takes, in bytes.
inline constexpr size_t kMaxUrlBytes = 8192;

// A URL taken apart by libcurl's parser, in the forms http.post uses.
struct ParsedUrl {
  // scheme://host:port/path[?query]: what patterns match, and what libcurl
  // is given.
  std::string canonical;
  // scheme://host:port.
  std::string origin;
  // The host as in `canonical` (an IPv6 literal in brackets).
  std::string host;
  // scheme://host:port/path, then "?…" when the URL has a query: the form
  // every error and log line shows, since a query (or user info, which is
  // refused) often holds a token.
  std::string redacted;
};

// A URL the list allows.
struct AllowedUrl {
  ParsedUrl url;
  // The address a matching entry names as its host ("http://127.0.0.1:*/**"
  // names 127.0.0.1), the only special address the request may reach; none
  // when every matching entry names a host name or a wildcard.
  std::optional<IpAddress> named_address;
};

class UrlAllowList {
 public:
  // An empty list: Check refuses every URL.
  UrlAllowList() = default;
  // Patterns as described above; the scheme and host part of each is
  // lower-cased and an address literal in it written in canonical form, as
  // URLs are. Patterns are not validated here: see ValidatePattern.
  explicit UrlAllowList(std::vector<std::string> patterns);

  // OK when `url` is a valid http or https URL whose canonical form matches
  // a pattern, with *allowed (if not null) filled; InvalidArgument saying
  // why not otherwise, quoting the URL in redacted form only.
  Status Check(std::string_view url, AllowedUrl* allowed = nullptr) const;

  // Whether canonical URL `text` matches `pattern` as described above.
  // Linear in the product of the two lengths.
  static bool Match(std::string_view pattern, std::string_view text);

  // InvalidArgument saying why `pattern` can match no canonical URL: it has
  // no scheme:// part, or its host:port part has no port (canonical URLs
  // always write one) and no `**`.
  static Status ValidatePattern(std::string_view pattern);

  // Takes `url` apart; InvalidArgument (quoting it redacted) when it is not
  // a valid http or https URL with a host, has user info or a fragment, or
  // is longer than kMaxUrlBytes.
  static Status Parse(std::string_view url, ParsedUrl* parsed);

  // The canonical scheme://host:port of `url`, or "" when it is not a valid
  // http or https URL (allowed or not).
  static std::string OriginOf(std::string_view url);

  // `text` (which may not parse as a URL) fit for an error message: at most
  // 200 bytes, anything from its first '?' shown as "?…", from its first
  // '#' dropped, user info before an '@' in its authority shown as "…@",
  // control bytes as '?'.
  static std::string Redact(std::string_view text);

 private:
  std::vector<std::string> patterns_;
  // Per pattern: whether its host part is an address literal.
  std::vector<bool> names_address_;
};

}  // namespace spool::http

#endif  // SPOOL_SERVER_URL_ALLOW_LIST_H_
