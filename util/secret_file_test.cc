// Secret and key files (include/spool/secret_file.h): what is refused, and
// that the file judged is the file read.

#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <spool/secret_file.h>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace spool {
namespace {

std::string Write(const std::string& path, const std::string& text,
                  mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::write(fd, text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  ::close(fd);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

TEST(SecretFileTest, ReadsTheFirstLineStripped) {
  testing::TempDir dir;
  std::string path =
      Write(dir.path() + "/s", "  0123456789abcdef0123 \nsecond\n", 0600);
  std::string secret;
  ASSERT_TRUE(LoadSecretFile("remote.secret_file", path, &secret).ok());
  EXPECT_EQ(secret, "0123456789abcdef0123");
}

TEST(SecretFileTest, RefusesGroupOrOtherAccessNamingTheFix) {
  testing::TempDir dir;
  std::string path = Write(dir.path() + "/s", "0123456789abcdef0123\n", 0640);
  std::string secret;
  Status s = LoadSecretFile("server.token_file", path, &secret);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("server.token_file " + path + " has mode 0640"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("chmod 600 " + path), std::string::npos);
  EXPECT_TRUE(secret.empty());
  EXPECT_TRUE(CheckPrivateFile("remote.tls.key", path).IsInvalidArgument());
}

TEST(SecretFileTest, JudgesTheTargetOfALink) {
  testing::TempDir dir;
  std::string target =
      Write(dir.path() + "/target", "0123456789abcdef0123\n", 0600);
  std::string link = dir.path() + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  std::string secret;
  EXPECT_TRUE(LoadSecretFile("k", link, &secret).ok());
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  EXPECT_TRUE(LoadSecretFile("k", link, &secret).IsInvalidArgument());
}

TEST(SecretFileTest, RefusesWhatIsNotARegularFileWithoutBlocking) {
  testing::TempDir dir;
  std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string secret;
  // A FIFO with no writer would block a plain open forever.
  Status s = LoadSecretFile("k", fifo, &secret);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos);
  EXPECT_TRUE(CheckPrivateFile("k", dir.path()).IsInvalidArgument());
}

TEST(SecretFileTest, MissingShortAndOversizedFiles) {
  testing::TempDir dir;
  std::string secret;
  EXPECT_TRUE(LoadSecretFile("k", dir.path() + "/none", &secret).IsNotFound());
  std::string short_secret = Write(dir.path() + "/short", "abc\n", 0600);
  Status s = LoadSecretFile("k", short_secret, &secret);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("at least 16 bytes"), std::string::npos);
  std::string big = Write(dir.path() + "/big",
                          std::string(kMaxPrivateFileBytes + 1, 'x'), 0400);
  std::string contents;
  s = ReadPrivateFile("k", big, &contents);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("larger than"), std::string::npos);
}

TEST(SecretFileTest, ReadPrivateFileReadsEveryByte) {
  testing::TempDir dir;
  std::string pem =
      "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n";
  std::string path = Write(dir.path() + "/key.pem", pem, 0600);
  std::string contents;
  ASSERT_TRUE(ReadPrivateFile("server.tls.key", path, &contents).ok());
  EXPECT_EQ(contents, pem);
  EXPECT_TRUE(CheckPrivateFile("server.tls.key", path).ok());
}

}  // namespace
}  // namespace spool
