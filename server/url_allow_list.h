// UrlAllowList: which URLs the http.post handler may send requests to.
//
// Each pattern is matched against a URL in canonical form,
// scheme://host:port/path[?query] (libcurl's URL parser: scheme and host
// lower-cased, the default port written out). `*` matches any run of
// characters except `/`, `**` any run, every other character itself. A URL
// with user info ("http://a@b/") or a fragment never matches, so that no
// pattern can be tricked into matching another host.
//
// Thread safety: const methods may be called concurrently.

#ifndef SPOOL_SERVER_URL_ALLOW_LIST_H_
#define SPOOL_SERVER_URL_ALLOW_LIST_H_

#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>

namespace spool::http {

class UrlAllowList {
 public:
  // An empty list: Check refuses every URL.
  UrlAllowList() = default;
  explicit UrlAllowList(std::vector<std::string> patterns)
      : patterns_(std::move(patterns)) {}

  // OK when `url` is a valid http or https URL whose canonical form
  // matches a pattern; InvalidArgument saying why not otherwise. On OK,
  // *canonical (if not null) holds the canonical form.
  Status Check(std::string_view url, std::string* canonical = nullptr) const;

  // Whether `text` matches `pattern` as described above.
  static bool Match(std::string_view pattern, std::string_view text);

  // The canonical scheme://host:port of `url`, or "" when it is not a valid
  // http or https URL (allowed or not).
  static std::string OriginOf(std::string_view url);

 private:
  // `url` in canonical form, and its scheme://host:port; InvalidArgument
  // saying why when it has none.
  static Status Canonical(std::string_view url, std::string* origin,
                          std::string* form);

  std::vector<std::string> patterns_;
};

}  // namespace spool::http

#endif  // SPOOL_SERVER_URL_ALLOW_LIST_H_
