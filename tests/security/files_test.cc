// The files spool keeps on disk (issue 27, docs/security.md): an encryption
// key file that group or others may read is refused at open, whatever the
// file really is; a storage directory spool creates is 0700 under any
// umask, an existing one keeps the mode its operator gave it; and another
// user cannot reach a store's files (run as root only: it switches a
// child process to `nobody`). Real files, real modes, real opens.

#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spool/encryption.h>
#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using ::testing::HasSubstr;
using testing::OpenOrDie;
using testing::TempDir;

unsigned ModeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// Sets the process's umask for a scope (the test's threads create no files
// meanwhile: no runtime is open when it changes).
class Umask {
 public:
  explicit Umask(mode_t mask) : saved_(::umask(mask)) {}
  ~Umask() { ::umask(saved_); }

 private:
  mode_t saved_;
};

Options StoreAt(const std::string& path) {
  Options options;
  options.path = path;
  options.workers = 1;
  return options;
}

std::string WriteKeyFile(const TempDir& dir, mode_t mode) {
  std::string path = dir.Sub("keys");
  std::ofstream(path) << EncryptionKeyToHex(GenerateEncryptionKey()) << "\n";
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

TEST(KeyFileModeTest, AKeyFileOthersMayReadIsRefusedAtOpen) {
  TempDir dir;
  for (mode_t loose : {0644, 0640, 0604, 0660, 0700 | 0004}) {
    std::string key_file = WriteKeyFile(dir, loose);
    Options options = StoreAt(dir.Sub("q"));
    options.encryption_key_file = key_file;
    std::unique_ptr<Runtime> runtime;
    Status s = Runtime::Open(options, &runtime);
    ASSERT_TRUE(s.IsInvalidArgument()) << std::oct << loose << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("storage.encryption_key_file " +
                                       key_file + " has mode 0"));
    EXPECT_THAT(s.message(), HasSubstr("chmod 600 " + key_file));
    // The read-only open (the spool tool's) holds the file to the same rule.
    s = Runtime::OpenReadOnly(options, &runtime);
    EXPECT_THAT(s.message(), HasSubstr("chmod 600"));
  }
  // Refused before anything was created.
  EXPECT_NE(::access(dir.Sub("q").c_str(), F_OK), 0);
  for (mode_t tight : {0600, 0400}) {
    std::string key_file = WriteKeyFile(dir, tight);  // a new key: a new store
    Options options = StoreAt(dir.Sub("q" + std::to_string(tight)));
    options.encryption_key_file = key_file;
    auto runtime = OpenOrDie(options);
    ASSERT_NE(runtime, nullptr) << std::oct << tight;
    EXPECT_TRUE(runtime->Close().Wait().ok());
    ::chmod(key_file.c_str(), 0600);  // the next WriteKeyFile rewrites it
  }
}

TEST(KeyFileModeTest, WhatIsJudgedIsTheFileOpenedNotAPathLookedAtBefore) {
  TempDir dir;
  // A FIFO in the key's place: refused at once (the open does not wait for
  // a writer), as not a regular file.
  std::string fifo = dir.Sub("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Options options = StoreAt(dir.Sub("q"));
  options.encryption_key_file = fifo;
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_THAT(s.message(), HasSubstr("not a regular file"));
  // A link to a loose file: the target's mode is judged.
  std::string loose = WriteKeyFile(dir, 0644);
  std::string link = dir.Sub("link");
  ASSERT_EQ(::symlink(loose.c_str(), link.c_str()), 0);
  options.encryption_key_file = link;
  s = Runtime::Open(options, &runtime);
  EXPECT_THAT(s.message(), HasSubstr("has mode 0644"));
  // A missing file is still named as one.
  options.encryption_key_file = dir.Sub("missing");
  s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.message(), HasSubstr(dir.Sub("missing") + ": no such file"));
}

TEST(StoreDirectoryModeTest, ANewStoreDirectoryIs0700UnderAnyUmask) {
  TempDir dir;
  for (mode_t mask : {022, 0, 077, 002}) {
    std::string path = dir.Sub("q" + std::to_string(mask));
    {
      Umask scoped(mask);
      auto runtime = OpenOrDie(StoreAt(path));
      ASSERT_NE(runtime, nullptr);
      EXPECT_TRUE(runtime->Close().Wait().ok());
    }
    EXPECT_EQ(ModeOf(path), 0700u) << "umask " << std::oct << mask;
    // The start log is the owner's alone too; RocksDB's files follow the
    // umask, behind the directory.
    EXPECT_EQ(ModeOf(path + "/spool-starts"), 0600u);
  }
}

TEST(StoreDirectoryModeTest, AnExistingDirectoryKeepsItsMode) {
  TempDir dir;
  std::string path = dir.Sub("q");
  ASSERT_EQ(::mkdir(path.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0750), 0);
  auto runtime = OpenOrDie(StoreAt(path));
  ASSERT_NE(runtime, nullptr);
  EXPECT_TRUE(runtime->Close().Wait().ok());
  EXPECT_EQ(ModeOf(path), 0750u);
  // A missing parent is not created: the error names the directory.
  std::unique_ptr<Runtime> refused;
  Status s = Runtime::Open(StoreAt(dir.Sub("no/such/q")), &refused);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("cannot create storage directory " +
                                     dir.Sub("no/such/q")));
}

TEST(StoreDirectoryModeTest, AReadOnlyOpensSecondaryDirectoryIs0700) {
  TempDir dir;
  std::string path = dir.Sub("q");
  {
    auto runtime = OpenOrDie(StoreAt(path));
    ASSERT_NE(runtime, nullptr);
    EXPECT_TRUE(runtime->Close().Wait().ok());
  }
  Umask scoped(0);
  Options options = StoreAt(path);
  options.secondary_path = dir.Sub("secondary");
  std::unique_ptr<Runtime> reader;
  Status s = Runtime::OpenReadOnly(options, &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ModeOf(options.secondary_path), 0700u);
  EXPECT_TRUE(reader->Close().Wait().ok());
}

TEST(StoreDirectoryModeTest, AnotherUserCannotReadTheStore) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root, to run a child as nobody";
  }
  TempDir dir;
  // TempDir is 0700 itself: open the way to the store as the usual
  // /var/lib would (0755), so that only the store's own mode stands.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  std::string path = dir.Sub("q");
  {
    Umask scoped(022);
    auto runtime = OpenOrDie(StoreAt(path));
    ASSERT_NE(runtime, nullptr);
    EXPECT_TRUE(runtime->Close().Wait().ok());
  }
  for (const std::string& file :
       {path + "/CURRENT", path, path + "/spool-starts"}) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // nobody: uid and gid 65534 on Debian.
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      int fd = ::open(file.c_str(), O_RDONLY);
      ::_exit(fd >= 0 ? 1 : (errno == EACCES ? 0 : 2));
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << file << ": 1 = nobody opened it, 2 = another error, 3 = setuid";
  }
}

}  // namespace
}  // namespace spool
