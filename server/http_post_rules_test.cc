// http.post's rules on their own: the allow-list's matching (`*` is one DNS
// label in the host), which address an entry names, the special address
// ranges, URL redaction, the option checks that keep control bytes out of
// headers, and the sleep payload's bound. tests/security/http_post_test.py
// attacks the same rules through a real spoold, libcurl and sockets.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string>
#include <vector>

#include <spool/http/builtin_handlers.h>
#include <spool/http/spoold_config.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/address_rules.h"
#include "server/url_allow_list.h"

namespace spool::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

IpAddress Ip(const std::string& text) {
  std::optional<IpAddress> ip = ParseIpLiteral(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress{});
}

// ---- Matching ----

TEST(UrlPatternTest, AStarIsOneDnsLabelInTheHost) {
  const std::string sub = "https://*.example.com:443/**";
  EXPECT_TRUE(UrlAllowList::Match(sub, "https://a.example.com:443/x"));
  EXPECT_FALSE(UrlAllowList::Match(sub, "https://a.b.example.com:443/x"));
  EXPECT_FALSE(
      UrlAllowList::Match(sub, "https://evil.com:443/.example.com:443/"));
  const std::string any_host = "http://*:8080/**";
  EXPECT_TRUE(UrlAllowList::Match(any_host, "http://localhost:8080/hook"));
  EXPECT_FALSE(UrlAllowList::Match(any_host, "http://a.b:8080/hook"));
  EXPECT_FALSE(UrlAllowList::Match(any_host, "http://127.0.0.1:8080/hook"));
  // Nor does it take the port separator: "a:1" is not one label.
  EXPECT_FALSE(UrlAllowList::Match("http://*/**", "http://a:1/x"));
  EXPECT_FALSE(UrlAllowList::Match("http://*:*/**", "http://[::1]:80/x"));
  // In the port it takes the digits.
  EXPECT_TRUE(UrlAllowList::Match("http://h:*/x", "http://h:8080/x"));
}

TEST(UrlPatternTest, InThePathAStarStaysInOneSegmentAndTwoCrossThem) {
  EXPECT_TRUE(UrlAllowList::Match("http://h:80/a/*", "http://h:80/a/b"));
  EXPECT_FALSE(UrlAllowList::Match("http://h:80/a/*", "http://h:80/a/b/c"));
  EXPECT_TRUE(
      UrlAllowList::Match("http://h:80/*.json", "http://h:80/a.b.json"));
  EXPECT_TRUE(UrlAllowList::Match("http://h:80/**", "http://h:80/a/b/c?d=e"));
  EXPECT_TRUE(UrlAllowList::Match("https://**", "https://a.b.c:1/d"));
  EXPECT_FALSE(UrlAllowList::Match("http://h:80/x", "http://h:80/xy"));
  EXPECT_TRUE(UrlAllowList::Match("**", ""));
  EXPECT_FALSE(UrlAllowList::Match("", "x"));
}

TEST(UrlPatternTest, ALongUrlAgainstManyWildcardsNeitherRecursesNorBacktracks) {
  // The old matcher recursed once per character (a URL of a few MB ran the
  // worker's stack out) and backtracked on every `**` (exponential). This
  // one is linear in both lengths: it answers at once.
  std::string url = "http://h:80/" + std::string(kMaxUrlBytes - 12, 'a');
  EXPECT_FALSE(
      UrlAllowList::Match("http://h:80/**a**a**a**a**a**a**a**b", url));
  EXPECT_TRUE(UrlAllowList::Match("http://h:80/**a**a**a**a**a**a**a**a", url));
  UrlAllowList list({"http://h:80/**"});
  EXPECT_TRUE(list.Check(url).ok());
  Status s = list.Check(url + "a");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.message(), HasSubstr("at most 8192"));
}

TEST(UrlPatternTest, PatternsWithoutAPortOrSchemeAreRefusedUpFront) {
  EXPECT_TRUE(UrlAllowList::ValidatePattern("http://h:*/**").ok());
  EXPECT_TRUE(UrlAllowList::ValidatePattern("https://**").ok());
  EXPECT_TRUE(UrlAllowList::ValidatePattern("http://[::1]:8080/**").ok());
  EXPECT_THAT(UrlAllowList::ValidatePattern("http://h/**").message(),
              HasSubstr("has no port"));
  EXPECT_THAT(UrlAllowList::ValidatePattern("http://[::1]/**").message(),
              HasSubstr("has no port"));
  EXPECT_THAT(UrlAllowList::ValidatePattern("h:80/**").message(),
              HasSubstr("no scheme://"));
}

// ---- Which address an entry names ----

TEST(UrlAllowListTest, OnlyAnEntryWithTheAddressAsItsHostNamesIt) {
  UrlAllowList list({"http://127.0.0.1:*/**", "http://*:8080/**", "https://**",
                     "http://[0:0::1]:*/**"});
  AllowedUrl allowed;
  ASSERT_TRUE(list.Check("http://127.0.0.1:9/a", &allowed).ok());
  ASSERT_TRUE(allowed.named_address.has_value());
  EXPECT_EQ(*allowed.named_address, Ip("127.0.0.1"));
  // Other spellings of the address are the address (libcurl's parser).
  for (const char* spelling : {"http://2130706433:9/", "http://0x7f000001:9/",
                               "http://0177.0.0.1:9/", "http://127.1:9/"}) {
    ASSERT_TRUE(list.Check(spelling, &allowed).ok()) << spelling;
    EXPECT_EQ(allowed.url.host, "127.0.0.1") << spelling;
    EXPECT_EQ(allowed.named_address, Ip("127.0.0.1")) << spelling;
  }
  // A host name, or a wildcard, names no address.
  ASSERT_TRUE(list.Check("http://localhost:8080/", &allowed).ok());
  EXPECT_FALSE(allowed.named_address.has_value());
  ASSERT_TRUE(list.Check("https://10.0.0.1:443/", &allowed).ok());
  EXPECT_FALSE(allowed.named_address.has_value());
  // IPv6 literals are compared in one canonical form.
  ASSERT_TRUE(list.Check("http://[::1]:7/", &allowed).ok());
  EXPECT_EQ(allowed.named_address, Ip("::1"));
  ASSERT_TRUE(list.Check("http://[0::0:1]:7/", &allowed).ok());
  EXPECT_EQ(allowed.url.canonical, "http://[::1]:7/");
}

TEST(UrlAllowListTest, PatternsAreMatchedWithALowerCaseHost) {
  UrlAllowList list({"HTTPS://Hooks.Example.COM:443/Path/**"});
  EXPECT_TRUE(list.Check("https://hooks.EXAMPLE.com/Path/x").ok());
  EXPECT_FALSE(list.Check("https://hooks.example.com/path/x").ok());
}

// ---- Redaction ----

TEST(UrlAllowListTest, ErrorsNeverQuoteAQueryOrUserInfo) {
  UrlAllowList list({"http://allowed:80/**"});
  Status s = list.Check("http://other:80/hook?token=s3cr3t");
  EXPECT_THAT(s.message(), HasSubstr("http://other:80/hook?\u2026"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  s = list.Check("http://user:s3cr3t@allowed:80/hook");
  EXPECT_THAT(s.message(), HasSubstr("user info"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  EXPECT_THAT(s.message(), Not(HasSubstr("user:")));
  s = list.Check("http://allowed:80/a b?token=s3cr3t");  // not a URL
  EXPECT_THAT(s.message(), HasSubstr("not a valid URL"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  s = list.Check("http://allowed:80/#s3cr3t");
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  s = list.Check(std::string("http://allowed:80/\0?s3cr3t", 26));
  EXPECT_THAT(s.message(), HasSubstr("NUL"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  s = list.Check("http://allowed:80/x\r\nX-Injected: 1");
  EXPECT_THAT(s.message(), HasSubstr("not a valid URL"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\r\n")));
  AllowedUrl allowed;
  ASSERT_TRUE(list.Check("http://allowed/p?token=s3cr3t", &allowed).ok());
  EXPECT_EQ(allowed.url.redacted, "http://allowed:80/p?\u2026");
  EXPECT_EQ(allowed.url.canonical, "http://allowed:80/p?token=s3cr3t");
  EXPECT_EQ(UrlAllowList::Redact("x://u:p@h/p?q"), "x://\u2026@h/p?\u2026");
  EXPECT_EQ(UrlAllowList::Redact("u:p@h/p"), "\u2026@h/p");
  EXPECT_EQ(UrlAllowList::Redact(std::string(300, 'a')).size(),
            200 + std::string("\u2026").size());
}

// ---- The address rules ----

TEST(AddressRulesTest, SpecialRangesAreRefusedAndPublicAddressesAreNot) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"10.0.0.1", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "link-local"},
      {"100.64.0.1", "carrier-grade NAT"},
      {"100.127.255.255", "carrier-grade NAT"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"192.0.0.170", "reserved"},
      {"198.18.0.1", "reserved"},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"::ffff:127.0.0.1", "IPv4-mapped form of a loopback"},
      {"::ffff:169.254.169.254", "IPv4-mapped form of a link-local"},
      {"::ffff:10.1.2.3", "IPv4-mapped form of a private"},
      {"::ffff:0.0.0.0", "IPv4-mapped form of an unspecified"},
      {"::127.0.0.1", "IPv4-compatible form of a loopback"},
      {"64:ff9b::a00:1", "NAT64 form of a private"},
      {"64:ff9b:1::1", "local-use NAT64"},
      {"fe80::1", "link-local"},
      {"febf::1", "link-local"},
      {"fec0::1", "site-local"},
      {"fc00::1", "unique-local"},
      {"fd12:3456::1", "unique-local"},
      {"ff02::1", "multicast"},
  };
  for (const auto& [text, why] : refused) {
    EXPECT_THAT(SpecialRangeOf(Ip(text)), HasSubstr(why)) << text;
    EXPECT_THAT(RefusalOf(Ip(text), std::nullopt), HasSubstr(why)) << text;
  }
  for (const char* open :
       {"8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1",
        "100.63.255.255", "169.253.0.1", "11.0.0.1", "223.255.255.255",
        "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
        "2606:4700::1111"}) {
    EXPECT_EQ(SpecialRangeOf(Ip(open)), "") << open;
    EXPECT_EQ(RefusalOf(Ip(open), std::nullopt), "") << open;
  }
  EXPECT_EQ(RefusalOf(Ip("169.254.169.254"), std::nullopt),
            "169.254.169.254, a link-local address (169.254.0.0/16, where "
            "cloud metadata services answer)");
}

TEST(AddressRulesTest, OnlyTheNamedAddressItselfIsLetThrough) {
  EXPECT_EQ(RefusalOf(Ip("127.0.0.1"), Ip("127.0.0.1")), "");
  EXPECT_NE(RefusalOf(Ip("127.0.0.2"), Ip("127.0.0.1")), "");
  EXPECT_NE(RefusalOf(Ip("::1"), Ip("127.0.0.1")), "");
  EXPECT_EQ(RefusalOf(Ip("::1"), Ip("[::1]")), "");
  EXPECT_EQ(RefusalOf(Ip("8.8.8.8"), Ip("127.0.0.1")), "");
}

TEST(AddressRulesTest, SocketAddressesAndLiteralsAreReadStrictly) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  ASSERT_EQ(inet_pton(AF_INET, "169.254.169.254", &in.sin_addr), 1);
  auto ip = IpAddressOf(reinterpret_cast<sockaddr*>(&in), sizeof in);
  ASSERT_TRUE(ip.has_value());
  EXPECT_EQ(ToString(*ip), "169.254.169.254");
  EXPECT_FALSE(IpAddressOf(reinterpret_cast<sockaddr*>(&in), 4).has_value());
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr), 1);
  ip = IpAddressOf(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  ASSERT_TRUE(ip.has_value());
  EXPECT_THAT(SpecialRangeOf(*ip), HasSubstr("loopback"));
  sockaddr unix_address{};
  unix_address.sa_family = AF_UNIX;
  EXPECT_FALSE(IpAddressOf(&unix_address, sizeof unix_address).has_value());
  // Host names and the forms inet_aton would take are not literals here:
  // URLs reach the check in libcurl's canonical form.
  for (const char* not_literal : {"localhost", "127.1", "0x7f000001", "", "[",
                                  "[]", "1.2.3.4.5", "[::1"}) {
    EXPECT_FALSE(ParseIpLiteral(not_literal).has_value()) << not_literal;
  }
}

// ---- Options that would break a header, and the sleep payload ----

TEST(HttpPostOptionsTest, ControlBytesInHeaderValuesAndBadProxiesAreRefused) {
  HttpPostOptions options;
  EXPECT_TRUE(ValidateHttpPostOptions(options).ok());
  options.content_type = "application/json\r\nX-Injected: 1";
  Status s = ValidateHttpPostOptions(options);
  EXPECT_THAT(s.message(), HasSubstr("handlers.\"http.post\".content_type"));
  BuiltinHandlersOptions handlers;
  handlers.http_post_options = options;
  EXPECT_TRUE(MakeBuiltinHandler(kHttpPostHandler, handlers)
                  .status()
                  .IsInvalidArgument());
  options = {};
  options.proxy = "ftp://proxy:21";
  EXPECT_THAT(ValidateHttpPostOptions(options).message(),
              HasSubstr("handlers.\"http.post\".proxy: scheme \"ftp\""));
  options.proxy = "u:s3cr3t@";
  s = ValidateHttpPostOptions(options);
  EXPECT_THAT(s.message(), HasSubstr("is not a URL"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cr3t")));
  options.proxy = "socks5h://user:pass@127.0.0.1:1080";
  EXPECT_TRUE(ValidateHttpPostOptions(options).ok());
  options = {};
  options.max_response_bytes = 0;
  EXPECT_THAT(ValidateHttpPostOptions(options).message(),
              HasSubstr("max_response_bytes"));
  options = {};
  options.allow = {"https://hooks.example.com/**"};
  EXPECT_THAT(ValidateHttpPostOptions(options).message(),
              HasSubstr("handlers.\"http.post\".allow: pattern"));
}

TEST(HttpPostOptionsTest, TheConfigRefusesThemWithFileKeyAndLine) {
  SpooldConfig config;
  config.runtime.path = "./spool-data";
  Status s = ParseSpooldConfig(
      "[handlers.\"http.post\"]\nallow = [\"http://h:*/**\"]\n"
      "content_type = \"text/plain\\r\\nX-Injected: 1\"\n",
      "spoold.toml", {}, &config);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.message(),
              HasSubstr("spoold.toml: handlers.\"http.post\".content_type"));
  EXPECT_THAT(s.message(), HasSubstr("(line 3)"));
  s = ParseSpooldConfig("[handlers.\"http.post\"]\nallow = [\"http://h/**\"]\n",
                        "spoold.toml", {}, &config);
  EXPECT_THAT(s.message(), HasSubstr("has no port"));
  EXPECT_THAT(s.message(), HasSubstr("(line 2)"));
  s = ParseSpooldConfig("", "--set", {"handlers.http.post.proxy=gopher://x:70"},
                        &config);
  EXPECT_THAT(s.message(), HasSubstr("handlers.\"http.post\".proxy"));
  s = ParseSpooldConfig("", "--set",
                        {"handlers.http.post.max_response_bytes=0"}, &config);
  EXPECT_THAT(s.message(), HasSubstr("max_response_bytes"));
  ASSERT_TRUE(ParseSpooldConfig("", "--set",
                                {"handlers.http.post.max_response_bytes=100",
                                 "handlers.http.post.proxy=http://p:3128"},
                                &config)
                  .ok());
  EXPECT_EQ(config.handlers.http_post_options.max_response_bytes, 100u);
  EXPECT_EQ(config.handlers.http_post_options.proxy, "http://p:3128");
}

TEST(SleepPayloadTest, MillisecondsPastTheDelayBoundAreRefusedNotWrapped) {
  EXPECT_EQ(ParseSleepPayload("250").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseSleepPayload(" 250 ").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseSleepPayload("2.5e2").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseSleepPayload("31536000000").value(),
            std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay));
  // 2^63 - 1 ms as microseconds wrapped to -1000 us: a sleep that ended at
  // once and succeeded.
  for (const char* refused :
       {"31536000001", "9223372036854775807", "18446744073709551615",
        "99999999999999999999", "-1", "1e300", "3.2e10", "abc", "", "[1]"}) {
    Result<std::chrono::milliseconds> ms = ParseSleepPayload(refused);
    EXPECT_TRUE(ms.status().IsInvalidArgument()) << refused;
  }
  EXPECT_THAT(ParseSleepPayload("9223372036854775807").status().message(),
              HasSubstr("from 0 to 31536000000 (365 days)"));
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(ParseSleepPayload(deep).status().message(),
              HasSubstr("nested deeper than"));
}

}  // namespace
}  // namespace spool::http
