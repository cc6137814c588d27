#include "server/url_allow_list.h"

#include <algorithm>
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

void Lower(std::string* text, size_t begin, size_t end) {
  for (size_t i = begin; i < end && i < text->size(); ++i) {
    (*text)[i] =
        static_cast<char>(std::tolower(static_cast<unsigned char>((*text)[i])));
  }
}

// Where the host:port part of `text` (a URL or a pattern) begins and ends:
// after "://", up to the first '/' (or the end). [0, 0) without "://".
std::pair<size_t, size_t> AuthorityOf(std::string_view text) {
  size_t scheme = text.find("://");
  if (scheme == std::string_view::npos) return {0, 0};
  size_t begin = scheme + 3;
  size_t end = text.find('/', begin);
  return {begin, end == std::string_view::npos ? text.size() : end};
}

// The host of an authority "host:port", "[v6]:port" or "host".
std::string_view HostOf(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    return close == std::string_view::npos ? authority
                                           : authority.substr(0, close + 1);
  }
  return authority.substr(0, authority.find(':'));
}

// An address literal in the canonical text URLs and patterns are compared
// in: dotted-quad, or inet_ntop's IPv6 in brackets.
std::string LiteralText(const IpAddress& address) {
  return address.family == AF_INET6 ? "[" + ToString(address) + "]"
                                    : ToString(address);
}

// A pattern's item: a character, `*` or `**`.
struct Item {
  enum Kind { kChar, kStar, kAnyRun } kind;
  char c;
};

std::vector<Item> ItemsOf(std::string_view pattern) {
  std::vector<Item> items;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '*') {
      items.push_back({Item::kChar, pattern[i]});
    } else if (i + 1 < pattern.size() && pattern[i + 1] == '*') {
      items.push_back({Item::kAnyRun, '*'});
      ++i;
    } else {
      items.push_back({Item::kStar, '*'});
    }
  }
  return items;
}

// The states a wildcard reaches by matching nothing.
void Close(const std::vector<Item>& items, std::vector<char>* states) {
  for (size_t p = 0; p < items.size(); ++p) {
    if ((*states)[p] && items[p].kind != Item::kChar) (*states)[p + 1] = 1;
  }
}

}  // namespace

UrlAllowList::UrlAllowList(std::vector<std::string> patterns)
    : patterns_(std::move(patterns)) {
  for (std::string& pattern : patterns_) {
    auto [begin, end] = AuthorityOf(pattern);
    Lower(&pattern, 0, end);
    std::string_view host =
        HostOf(std::string_view(pattern).substr(begin, end - begin));
    std::optional<IpAddress> literal = ParseIpLiteral(host);
    if (literal) {
      pattern.replace(begin, host.size(), LiteralText(*literal));
    }
    names_address_.push_back(literal.has_value());
  }
}

bool UrlAllowList::Match(std::string_view pattern, std::string_view text) {
  // A simulation of the pattern as an automaton, one set of states per
  // character of `text`: no recursion, no backtracking, whatever the URL.
  const std::vector<Item> items = ItemsOf(pattern);
  auto [authority_begin, authority_end] = AuthorityOf(text);
  std::vector<char> states(items.size() + 1, 0), next(items.size() + 1, 0);
  states[0] = 1;
  Close(items, &states);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool in_authority = i >= authority_begin && i < authority_end;
    const bool star_takes =
        c != '/' && !(in_authority && (c == '.' || c == ':'));
    std::fill(next.begin(), next.end(), 0);
    bool any = false;
    for (size_t p = 0; p < items.size(); ++p) {
      if (!states[p]) continue;
      const Item& item = items[p];
      if (item.kind == Item::kChar && item.c == c) next[p + 1] = 1;
      if (item.kind == Item::kAnyRun ||
          (item.kind == Item::kStar && star_takes))
        next[p] = 1;
    }
    Close(items, &next);
    states.swap(next);
    for (char s : states) any |= s != 0;
    if (!any) return false;
  }
  return states[items.size()] != 0;
}

Status UrlAllowList::ValidatePattern(std::string_view pattern) {
  auto [begin, end] = AuthorityOf(pattern);
  if (pattern.find("://") == std::string_view::npos) {
    return Status::InvalidArgument("pattern \"" + std::string(pattern) +
                                   "\" has no scheme:// part");
  }
  std::string_view authority = pattern.substr(begin, end - begin);
  std::string_view host = HostOf(authority);
  bool has_port =
      authority.size() > host.size() + 1 && authority[host.size()] == ':';
  if (!has_port && authority.find("**") == std::string_view::npos) {
    return Status::InvalidArgument(
        "pattern \"" + std::string(pattern) +
        "\" has no port: URLs are matched with their port written out "
        "(https://host:443/...), so it matches none; write the port or *");
  }
  return Status::OK();
}

Status UrlAllowList::Parse(std::string_view url, ParsedUrl* parsed) {
  if (url.size() > kMaxUrlBytes) {
    return Status::InvalidArgument(
        "a URL of " + std::to_string(url.size()) +
        " bytes is refused; http.post takes at most " +
        std::to_string(kMaxUrlBytes) + ": " + Redact(url));
  }
  // A NUL would end the text libcurl sees, and parse a shorter URL.
  if (url.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("not a valid URL (it holds a NUL byte): " +
                                   Redact(url));
  }
  std::unique_ptr<CURLU, UrlDeleter> handle(curl_url());
  if (!handle) return Status::IOError("out of memory parsing a URL");
  const std::string text(url);
  if (curl_url_set(handle.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) {
    return Status::InvalidArgument("not a valid URL: " + Redact(url));
  }
  auto part = [&](CURLUPart which, unsigned flags, std::string* out) {
    CurlString value;
    if (curl_url_get(handle.get(), which, &value.text, flags) != CURLUE_OK ||
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
        "only http and https URLs may be posted to: " + Redact(url));
  }
  if (part(CURLUPART_USER, 0, &ignored) ||
      part(CURLUPART_PASSWORD, 0, &ignored) ||
      part(CURLUPART_FRAGMENT, 0, &ignored)) {
    return Status::InvalidArgument(
        "a URL with user info or a fragment is refused: " + Redact(url));
  }
  if (!part(CURLUPART_HOST, 0, &host) ||
      !part(CURLUPART_PORT, CURLU_DEFAULT_PORT, &port)) {
    return Status::InvalidArgument("a URL needs a host: " + Redact(url));
  }
  Lower(&host, 0, host.size());
  if (std::optional<IpAddress> literal = ParseIpLiteral(host)) {
    host = LiteralText(*literal);
  }
  if (!part(CURLUPART_PATH, 0, &path)) path = "/";
  parsed->host = host;
  parsed->origin = scheme + "://" + host + ":" + port;
  parsed->canonical = parsed->origin + path;
  parsed->redacted = parsed->canonical;
  if (part(CURLUPART_QUERY, 0, &query)) {
    parsed->canonical += "?" + query;
    parsed->redacted += "?\u2026";
  }
  return Status::OK();
}

std::string UrlAllowList::OriginOf(std::string_view url) {
  ParsedUrl parsed;
  return Parse(url, &parsed).ok() ? parsed.origin : std::string();
}

std::string UrlAllowList::Redact(std::string_view text) {
  const size_t cut = text.find_first_of("?#");
  const bool query = cut != std::string_view::npos && text[cut] == '?';
  std::string head(text.substr(0, cut));
  auto [begin, end] = AuthorityOf(head);
  if (end == 0) end = head.find('/');
  if (end == std::string::npos) end = head.size();
  size_t at = head.rfind('@', end == 0 ? 0 : end - 1);
  if (at != std::string::npos && at >= begin && at < end) {
    head.replace(begin, at + 1 - begin, "\u2026@");
  }
  constexpr size_t kShown = 200;
  if (head.size() > kShown) head = head.substr(0, kShown) + "\u2026";
  for (char& c : head) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return query ? head + "?\u2026" : head;
}

Status UrlAllowList::Check(std::string_view url, AllowedUrl* allowed) const {
  ParsedUrl parsed;
  if (Status s = Parse(url, &parsed); !s.ok()) return s;
  bool matched = false;
  std::optional<IpAddress> named;
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (!Match(patterns_[i], parsed.canonical)) continue;
    matched = true;
    // A literal host matches only the same literal: the URL's host is it.
    if (names_address_[i]) named = ParseIpLiteral(parsed.host);
  }
  if (!matched) {
    return Status::InvalidArgument("URL not in handlers.\"http.post\".allow: " +
                                   parsed.redacted);
  }
  if (allowed != nullptr) {
    allowed->url = std::move(parsed);
    allowed->named_address = named;
  }
  return Status::OK();
}

}  // namespace spool::http
