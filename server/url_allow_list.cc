#include "server/url_allow_list.h"

#include <cctype>
#include <curl/curl.h>
#include <memory>

namespace spool::http {
namespace {

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
struct CurlString {
  char* text = nullptr;
  ~CurlString() { curl_free(text); }
};

}  // namespace

bool UrlAllowList::Match(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern[0] == '*') {
    bool any = pattern.size() > 1 && pattern[1] == '*';
    std::string_view rest = pattern.substr(any ? 2 : 1);
    for (size_t i = 0;; ++i) {
      if (Match(rest, text.substr(i))) return true;
      if (i == text.size() || (!any && text[i] == '/')) return false;
    }
  }
  if (text.empty() || pattern[0] != text[0]) return false;
  return Match(pattern.substr(1), text.substr(1));
}

Status UrlAllowList::Canonical(std::string_view url, std::string* origin,
                               std::string* form) {
  std::unique_ptr<CURLU, UrlDeleter> parsed(curl_url());
  if (!parsed) return Status::IOError("out of memory parsing a URL");
  std::string text(url);
  if (curl_url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) {
    return Status::InvalidArgument("not a valid URL: " + text);
  }
  auto part = [&](CURLUPart which, unsigned flags, std::string* out) {
    CurlString value;
    if (curl_url_get(parsed.get(), which, &value.text, flags) != CURLUE_OK ||
        value.text == nullptr) {
      return false;
    }
    *out = value.text;
    return true;
  };
  std::string scheme, host, port, path, query, ignored;
  if (!part(CURLUPART_SCHEME, 0, &scheme) ||
      (scheme != "http" && scheme != "https")) {
    return Status::InvalidArgument(
        "only http and https URLs may be posted to: " + text);
  }
  if (part(CURLUPART_USER, 0, &ignored) ||
      part(CURLUPART_PASSWORD, 0, &ignored) ||
      part(CURLUPART_FRAGMENT, 0, &ignored)) {
    return Status::InvalidArgument(
        "a URL with user info or a fragment is refused: " + text);
  }
  if (!part(CURLUPART_HOST, 0, &host) ||
      !part(CURLUPART_PORT, CURLU_DEFAULT_PORT, &port)) {
    return Status::InvalidArgument("a URL needs a host: " + text);
  }
  for (char& c : host)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!part(CURLUPART_PATH, 0, &path)) path = "/";
  *origin = scheme + "://" + host + ":" + port;
  *form = *origin + path;
  if (part(CURLUPART_QUERY, 0, &query)) *form += "?" + query;
  return Status::OK();
}

std::string UrlAllowList::OriginOf(std::string_view url) {
  std::string origin, form;
  return Canonical(url, &origin, &form).ok() ? origin : std::string();
}

Status UrlAllowList::Check(std::string_view url, std::string* canonical) const {
  std::string origin, form;
  Status s = Canonical(url, &origin, &form);
  if (!s.ok()) return s;
  for (const std::string& pattern : patterns_) {
    if (Match(pattern, form)) {
      if (canonical != nullptr) *canonical = form;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("URL not in handlers.\"http.post\".allow: " +
                                 form);
}

}  // namespace spool::http
