#include "benchmarks/worker_process.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace spool::bench {
namespace {

std::string DescribeExit(int status) {
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

void Consume(std::string_view line, WorkerResult* result) {
  ProtocolLine parsed = ParseProtocolLine(line);
  switch (parsed.kind) {
    case 'R':
      result->rows.push_back(std::move(parsed.row));
      break;
    case 'N':
      result->notes.push_back(std::move(parsed.text));
      break;
    case 'I':
      result->info[parsed.key] = std::move(parsed.text);
      break;
    case 'E':
      result->errors.push_back(std::move(parsed.text));
      break;
    default:
      result->errors.push_back("malformed line from the worker: " +
                               std::string(line));
  }
}

}  // namespace

WorkerResult RunWorkerProcess(const std::vector<std::string>& args,
                              std::chrono::seconds timeout) {
  WorkerResult result;
  auto started = SteadyClock::now();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.failure = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    result.failure = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    // The child: own process group (so a timeout can kill it and whatever
    // it started), killed if we die, stdout onto stderr, and the pipe's
    // write end kept open across exec (dup clears close-on-exec).
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(STDERR_FILENO, STDOUT_FILENO);
    int fd = dup(fds[1]);
    std::vector<std::string> full = {"spool-bench"};
    full.insert(full.end(), args.begin(), args.end());
    full.push_back("--worker-fd");
    full.push_back(std::to_string(fd));
    std::vector<char*> argv;
    for (std::string& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // Also here, so that it holds before we might kill.
  close(fds[1]);

  const auto deadline = started + timeout;
  std::string buffer;
  bool timed_out = false;
  char chunk[8192];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready =
        poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child and everything it started is done.
    buffer.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      Consume(std::string_view(buffer).substr(0, newline), &result);
      buffer.erase(0, newline + 1);
    }
  }
  close(fds[0]);
  if (!buffer.empty()) Consume(buffer, &result);  // A crash mid-line.

  if (timed_out) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  // After EOF the child is exiting; give it a bounded time, then kill it.
  int status = 0;
  auto reap_deadline = SteadyClock::now() + std::chrono::seconds(15);
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      status = -1;
      break;
    }
    if (SteadyClock::now() > reap_deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (result.failure.empty()) {
        result.failure = "did not exit after closing its pipe; killed";
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Servers the worker started live in their own process groups and die
  // with it (PR_SET_PDEATHSIG); nothing else is left to clean.
  if (timed_out) {
    result.failure =
        "timed out after " + std::to_string(timeout.count()) + " s; killed";
  } else if (result.failure.empty() && status != 0) {
    result.failure =
        status == -1 ? "could not be reaped" : DescribeExit(status);
  }
  result.seconds = MicrosBetween(started, SteadyClock::now()) / 1e6;
  return result;
}

}  // namespace spool::bench
