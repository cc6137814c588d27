// The request guard's parsing on its own: the Host field's name and the
// bearer comparison. tests/security/spoold_attack_test.py attacks the same
// rules through a real spoold (421 for a foreign Host, 401 without the
// token); fuzz/fuzz_http_request.cc checks them on arbitrary requests.

#include "server/request_guard.h"

#include <string>

#include <gtest/gtest.h>

#include "server/bearer_token.h"

namespace spool::http {
namespace {

TEST(HostNameTest, IsTheNameInLowerCaseWithoutItsPort) {
  EXPECT_EQ(HostName("Example.COM:80"), "example.com");
  EXPECT_EQ(HostName("localhost"), "localhost");
  EXPECT_EQ(HostName("127.0.0.1:8470"), "127.0.0.1");
  EXPECT_EQ(HostName("[::1]:8470"), "[::1]");
  EXPECT_EQ(HostName("[FE80::1]"), "[fe80::1]");
}

TEST(HostNameTest, IsEmptyForAnythingElse) {
  for (const char* host :
       {"", "a:b:c", "evil]", "ev[il", "[::1", "[::1]x", "[::1]]", "[g::1]",
        "under_score", "sp ace", "a/b", "a@b", "x\r\ny"}) {
    EXPECT_EQ(HostName(host), "") << host;
  }
}

TEST(BearerMatchesTest, AdmitsTheTokenAfterTheSchemeInAnyCase) {
  const std::string token = "0123456789abcdef";
  EXPECT_TRUE(BearerMatches("Bearer " + token, token));
  EXPECT_TRUE(BearerMatches("bEARER " + token, token));
  EXPECT_FALSE(BearerMatches("Bearer  " + token, token));
  EXPECT_FALSE(BearerMatches("Bearer " + token + "x", token));
  EXPECT_FALSE(BearerMatches("Basic " + token, token));
  EXPECT_FALSE(BearerMatches("Bearer ", ""));
}

}  // namespace
}  // namespace spool::http
