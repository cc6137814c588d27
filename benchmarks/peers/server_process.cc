#include "benchmarks/peers/server_process.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include "benchmarks/peers/scoped_fd.h"

extern char** environ;

namespace spool::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int err) { return std::strerror(err); }

// The steps the child takes between fork and exec, to name the one that
// failed.
enum class ChildStep : int {
  kSetpgid,
  kRedirect,
  kChdir,
  kSetgroups,
  kSetgid,
  kSetuid,
  kDeathSignal,
  kExec,
};

const char* StepName(ChildStep step) {
  switch (step) {
    case ChildStep::kSetpgid:
      return "setpgid";
    case ChildStep::kRedirect:
      return "redirecting stdio";
    case ChildStep::kChdir:
      return "chdir";
    case ChildStep::kSetgroups:
      return "setgroups";
    case ChildStep::kSetgid:
      return "setresgid";
    case ChildStep::kSetuid:
      return "setresuid";
    case ChildStep::kDeathSignal:
      return "prctl(PR_SET_PDEATHSIG)";
    case ChildStep::kExec:
      return "execve";
  }
  return "?";
}

// What the child writes to the error pipe when a step fails.
struct ChildError {
  int step;
  int err;
};

// Everything the child needs, prepared before fork(): in the child of a
// multi-threaded process only async-signal-safe calls are allowed, so it
// must neither allocate nor look anything up.
struct ChildPlan {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_dir = nullptr;
  int stdin_fd = -1;
  int log_fd = -1;
  int error_fd = -1;
  pid_t parent = -1;
  bool drop_privileges = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t group_count = 0;
};

// Makes `to` a copy of `from` that survives exec.
bool Redirect(int from, int to) {
  if (from == to) return fcntl(to, F_SETFD, 0) == 0;
  return dup2(from, to) == to;
}

// Runs in the child; never returns. Async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& p) {
  auto fail = [&p](ChildStep step) {
    ChildError error{static_cast<int>(step), errno};
    ssize_t ignored = write(p.error_fd, &error, sizeof(error));
    (void)ignored;
    _exit(127);
  };
  // Our own process group, so that Stop reaches helpers the server forks.
  if (setpgid(0, 0) != 0) fail(ChildStep::kSetpgid);
  // The forking thread's signal mask and ignored signals survive exec; the
  // server must start with defaults or it may not hear its stop signal.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);

  if (!Redirect(p.stdin_fd, STDIN_FILENO) ||
      !Redirect(p.log_fd, STDOUT_FILENO) ||
      !Redirect(p.log_fd, STDERR_FILENO)) {
    fail(ChildStep::kRedirect);
  }
  if (chdir(p.working_dir) != 0) fail(ChildStep::kChdir);
  if (p.drop_privileges) {
    // Raw system calls: glibc's wrappers coordinate all threads of the
    // process, machinery that a forked child must not touch.
    if (syscall(SYS_setgroups, p.group_count, p.groups) != 0) {
      fail(ChildStep::kSetgroups);
    }
    if (syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) {
      fail(ChildStep::kSetgid);
    }
    if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) {
      fail(ChildStep::kSetuid);
    }
  }
  // After the credential change, which clears the death signal.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(ChildStep::kDeathSignal);
  // The parent may have died before prctl; then nobody would stop us.
  if (getppid() != p.parent) _exit(127);
  // Descriptors the application opened without O_CLOEXEC must not leak into
  // the server. Best effort: needs Linux 5.11.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  execve(p.argv[0], p.argv, p.envp);
  fail(ChildStep::kExec);
  _exit(127);  // Not reached; tells the compiler so.
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) +
           ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// The state of our child `pid`, found without reaping it: an unreaped zombie
// keeps its pid, and so its process group id, from being reused.
enum class ChildState { kRunning, kZombie, kGone };

ChildState ProbeChild(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid), &info,
               WEXITED | WNOHANG | WNOWAIT);
  } while (r != 0 && errno == EINTR);
  // ECHILD: reaped by someone else, e.g. an application SIGCHLD handler.
  if (r != 0) return ChildState::kGone;
  return info.si_pid == pid ? ChildState::kZombie : ChildState::kRunning;
}

// Polls `done` until it holds or `timeout` passes; returns whether it held.
template <class Predicate>
bool PollUntil(Predicate done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(500);
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2,
                                                std::chrono::milliseconds(10));
  }
  return true;
}

std::string FileName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The environment for the child: ours, with LC_ALL=C so that its messages
// (which we search for "Address already in use") are in English.
std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "LC_ALL=", 7) != 0) env.emplace_back(*e);
  }
  env.emplace_back("LC_ALL=C");
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string WithLogTail(const std::string& message, const ChildProcess& p) {
  std::string tail = p.LogTail();
  return message + "; log tail:\n" + (tail.empty() ? "(log is empty)" : tail);
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const ChildCommand& command) {
  if (command.argv.empty() || command.argv[0].empty()) {
    return Status::InvalidArgument("ChildCommand.argv is empty");
  }
  const std::string name = FileName(command.argv[0]);
  std::vector<std::string> args = command.argv;
  std::vector<char*> argv = CStrings(args);
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> envp = CStrings(env);

  ChildPlan plan;
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.working_dir = command.working_dir.c_str();
  plan.parent = getpid();

  std::vector<gid_t> groups;
  if (!command.run_as_user.empty()) {
    std::vector<char> buffer(16384);
    struct passwd pwd;
    struct passwd* found = nullptr;
    int err = getpwnam_r(command.run_as_user.c_str(), &pwd, buffer.data(),
                         buffer.size(), &found);
    if (found == nullptr) {
      return Status::NotSupported(
          "cannot run " + name + " as user " + command.run_as_user + ": " +
          (err != 0 ? ErrnoText(err) : std::string("no such user")));
    }
    int count = 32;
    groups.resize(count);
    if (getgrouplist(command.run_as_user.c_str(), pwd.pw_gid, groups.data(),
                     &count) < 0) {
      groups.resize(count);
      getgrouplist(command.run_as_user.c_str(), pwd.pw_gid, groups.data(),
                   &count);
    }
    groups.resize(count);
    plan.drop_privileges = true;
    plan.uid = pwd.pw_uid;
    plan.gid = pwd.pw_gid;
    plan.groups = groups.data();
    plan.group_count = groups.size();
  }

  ScopedFd log(open(command.log_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log.valid()) {
    return Status::IOError("cannot open log file " + command.log_path +
                           " for " + name + ": " + ErrnoText(errno));
  }
  ScopedFd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) {
    return Status::IOError("cannot open /dev/null: " + ErrnoText(errno));
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Status::IOError("pipe2: " + ErrnoText(errno));
  }
  ScopedFd error_read(pipe_fds[0]);
  ScopedFd error_write(pipe_fds[1]);
  plan.stdin_fd = dev_null.get();
  plan.log_fd = log.get();
  plan.error_fd = error_write.get();

  pid_t pid = fork();
  if (pid < 0) {
    return Status::IOError("fork for " + name + ": " + ErrnoText(errno));
  }
  if (pid == 0) RunChild(plan);

  // The child does this too; whichever runs first wins, so that Stop can
  // signal the group as soon as Start returns. EACCES after exec is fine.
  setpgid(pid, pid);
  error_write.reset();
  ChildError error{};
  ssize_t n;
  do {
    n = read(error_read.get(), &error, sizeof(error));
  } while (n < 0 && errno == EINTR);
  if (n != 0) {
    // The child failed before exec and has exited (or is about to).
    waitpid(pid, nullptr, 0);
    if (n != static_cast<ssize_t>(sizeof(error))) {
      return Status::IOError("starting " + command.argv[0] +
                             ": the child failed before exec");
    }
    std::string what = StepName(static_cast<ChildStep>(error.step));
    if (static_cast<ChildStep>(error.step) == ChildStep::kChdir) {
      what += " " + command.working_dir;
    }
    return Status::IOError("starting " + command.argv[0] + ": " + what + ": " +
                           ErrnoText(error.err));
  }
  // The pipe closed without a word: exec succeeded.
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, name, command.log_path, command.stop_signal));
}

ChildProcess::ChildProcess(pid_t pid, std::string name, std::string log_path,
                           int stop_signal)
    : pid_(pid),
      name_(std::move(name)),
      log_path_(std::move(log_path)),
      stop_signal_(stop_signal) {}

ChildProcess::~ChildProcess() {
  // Nobody is left to hear about a forced kill.
  static_cast<void>(Stop());
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  if (ProbeChild(pid_) == ChildState::kRunning) return true;
  KillStragglersAndReap();
  return false;
}

bool ChildProcess::Exited() const {
  return reaped_ || ProbeChild(pid_) != ChildState::kRunning;
}

void ChildProcess::KillStragglersAndReap() {
  if (ProbeChild(pid_) == ChildState::kGone) {
    // Its pid may already belong to an unrelated process: signal nothing.
    exit_description_ = "exited (reaped elsewhere)";
    exit_status_ = -1;
    reaped_ = true;
    return;
  }
  // The leader is a zombie, so the group id is still ours.
  kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_description_ =
      r == pid_ ? DescribeWaitStatus(status) : "exited (status unknown)";
  exit_status_ = r != pid_             ? -1
                 : WIFEXITED(status)   ? WEXITSTATUS(status)
                 : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : -1;
  reaped_ = true;
}

Result<int> ChildProcess::WaitForExit(std::chrono::milliseconds timeout) {
  if (!PollUntil([this] { return !Running(); }, timeout)) {
    return Status::TimedOut(name_ + " (pid " + std::to_string(pid_) +
                            ") still runs after " +
                            std::to_string(timeout.count()) + " ms");
  }
  return exit_status_;
}

Status ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (!Running()) return Status::OK();
  kill(-pid_, stop_signal_);
  if (PollUntil([this] { return Exited(); }, grace)) {
    KillStragglersAndReap();
    return Status::OK();
  }
  kill(-pid_, SIGKILL);
  // SIGKILL cannot be caught; only a process stuck in the kernel (e.g. on a
  // hung disk) outlives this wait, and then we leave it to init.
  if (PollUntil([this] { return Exited(); }, std::chrono::seconds(10))) {
    KillStragglersAndReap();
  }
  return Status::TimedOut(name_ + " (pid " + std::to_string(pid_) +
                          ") did not stop within " +
                          std::to_string(grace.count()) + " ms of signal " +
                          std::to_string(stop_signal_) + "; killed it");
}

std::string ChildProcess::LogTail(size_t max_bytes) const {
  ScopedFd fd(open(log_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return "";
  off_t size = st.st_size;
  off_t start = size > static_cast<off_t>(max_bytes)
                    ? size - static_cast<off_t>(max_bytes)
                    : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  ssize_t n = pread(fd.get(), text.data(), text.size(), start);
  if (n <= 0) return "";
  text.resize(static_cast<size_t>(n));
  if (start > 0) {
    // Drop the partial first line.
    size_t newline = text.find('\n');
    text.erase(0, newline == std::string::npos ? 0 : newline + 1);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

Result<uint16_t> PickFreeLoopbackPort() {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::IOError("socket: " + ErrnoText(errno));
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::IOError("bind 127.0.0.1:0: " + ErrnoText(errno));
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::IOError("getsockname: " + ErrnoText(errno));
  }
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

Result<LaunchedServer> LaunchServer(const LaunchSpec& spec) {
  const int attempts = spec.port == 0 ? 3 : 1;
  Status last_error;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    uint16_t port = spec.port;
    if (port == 0) {
      Result<uint16_t> picked = PickFreeLoopbackPort();
      if (!picked.ok()) return picked.status();
      port = *picked;
    }
    ChildCommand command = spec.command(port);
    if (command.argv.empty()) {
      return Status::InvalidArgument("LaunchSpec.command gave no argv");
    }
    if (access(command.argv[0].c_str(), X_OK) != 0) {
      return Status::NotSupported(command.argv[0] + " is not installed (" +
                                  ErrnoText(errno) + ")");
    }
    Result<std::unique_ptr<ChildProcess>> started =
        ChildProcess::Start(command);
    if (!started.ok()) return started.status();
    std::unique_ptr<ChildProcess> child = std::move(started).value();
    const std::string where =
        child->name() + " on 127.0.0.1:" + std::to_string(port);

    const auto deadline = Clock::now() + spec.start_timeout;
    while (true) {
      if (!child->Running()) {
        std::string tail = child->LogTail();
        bool port_taken =
            tail.find("Address already in use") != std::string::npos;
        std::string message =
            where + " " + child->exit_description() + " during start-up";
        if (port_taken && attempt < attempts) {
          // Someone took the picked port before the server bound it.
          last_error = Status::Busy(WithLogTail(message, *child));
          break;
        }
        if (port_taken) {
          return Status::Busy(
              WithLogTail(message + ": the port is in use", *child));
        }
        return Status::IOError(WithLogTail(message, *child));
      }
      Status probe = spec.probe(port, child->pid());
      if (probe.ok()) return LaunchedServer{std::move(child), port};
      if (Clock::now() >= deadline) {
        std::string message = where + " did not answer within " +
                              std::to_string(spec.start_timeout.count()) +
                              " ms (last probe: " + probe.ToString() + ")";
        Status timed_out = Status::TimedOut(WithLogTail(message, *child));
        static_cast<void>(child->Stop());
        return timed_out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return last_error;
}

}  // namespace spool::bench
