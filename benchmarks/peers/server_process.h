// Server processes for the peers that have one (redis, beanstalkd, postgres):
// starting them as children that cannot outlive the benchmark, waiting until
// they serve, and stopping them within a bounded time.

#ifndef SPOOL_BENCHMARKS_PEERS_SERVER_PROCESS_H_
#define SPOOL_BENCHMARKS_PEERS_SERVER_PROCESS_H_

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <spool/status.h>

namespace spool::bench {

// How to run one program as a child process.
struct ChildCommand {
  // argv[0] is the absolute path of the program; no PATH search is done.
  std::vector<std::string> argv;
  // The child's working directory.
  std::string working_dir;
  // The child's stdout and stderr go to this file, truncated first.
  std::string log_path;
  // If not empty, the child drops to this user (and its groups) before exec.
  // REQUIRES: we run as root.
  std::string run_as_user;
  // The signal that asks the program for a clean, fast shutdown.
  int stop_signal = SIGTERM;
};

// A program running as our child, in a process group of its own.
//
// The child gets SIGKILL when the thread that started it exits
// (PR_SET_PDEATHSIG), so a crash or kill of the benchmark does not leave it
// running. Stop (or the destructor) signals the whole process group, waits a
// bounded time, and kills what is left. Descendants that leave the group
// (postgres backends call setsid) are not signalled; such servers stop them
// when they stop.
//
// Thread safety: not thread-safe; one owner.
class ChildProcess {
 public:
  // Forks and execs `command`. Returns an error naming the step that failed
  // (e.g. "execve /usr/bin/x: No such file or directory"); never leaves a
  // child behind on error.
  static Result<std::unique_ptr<ChildProcess>> Start(
      const ChildCommand& command);

  // Stop() with the default grace period.
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The program's file name, e.g. "redis-server", for messages.
  const std::string& name() const { return name_; }

  // Whether the child has not exited yet. Once it has, reaps it and stores
  // how it ended in exit_description().
  bool Running();

  // How the child ended ("exited with status 1", "killed by signal 9"), or
  // empty while it runs.
  const std::string& exit_description() const { return exit_description_; }

  // Waits up to `timeout` for the child to exit on its own. Returns its exit
  // status (0..255, or 128 + signal), or TimedOut; the child keeps running
  // on TimedOut.
  Result<int> WaitForExit(std::chrono::milliseconds timeout);

  // Sends the stop signal to the process group, waits up to `grace` for the
  // child to exit, then sends SIGKILL to the group; reaps the child. Returns
  // OK if the child exited in time, TimedOut if it had to be killed.
  // Idempotent: later calls return OK at once.
  Status Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // The last lines of the child's log (at most about `max_bytes`), for error
  // messages. Empty if the log is empty or unreadable.
  std::string LogTail(size_t max_bytes = 1200) const;

 private:
  ChildProcess(pid_t pid, std::string name, std::string log_path,
               int stop_signal);

  // Whether the child has exited (reaped or not).
  bool Exited() const;
  // Kills what is left of the process group, then reaps the exited leader.
  // REQUIRES: the leader has exited.
  void KillStragglersAndReap();

  pid_t pid_;
  std::string name_;
  std::string log_path_;
  int stop_signal_;
  bool reaped_ = false;
  int exit_status_ = -1;
  std::string exit_description_;
};

// Asks the kernel for a TCP port on 127.0.0.1 that is free now. Another
// process may take it before a server binds it; LaunchServer copes with that.
Result<uint16_t> PickFreeLoopbackPort();

// How to start a server and tell when it serves.
struct LaunchSpec {
  // A fixed port, or 0 to pick a free one.
  uint16_t port = 0;
  // The command that runs the server on `port`.
  std::function<ChildCommand(uint16_t port)> command;
  // Returns OK once the server on `port` answers and is the process `pid`
  // (not some other program that happens to hold the port). Called every
  // 20 ms until it succeeds, the server exits, or the start timeout passes;
  // it must bound its own waits (a few seconds at most).
  std::function<Status(uint16_t port, pid_t pid)> probe;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
};

// A server that LaunchServer started and found serving.
struct LaunchedServer {
  std::unique_ptr<ChildProcess> process;
  uint16_t port = 0;
};

// Starts the server and waits until `probe` succeeds. With a picked port,
// a server that fails because the port was taken in the meantime is retried
// on another port (three attempts). Errors:
//   NotSupported - the program does not exist or is not executable;
//   Busy         - the fixed port is in use;
//   IOError      - the server exited during start-up;
//   TimedOut     - it did not answer within the start timeout.
// Every error message names the program and port and ends with its log tail.
// On error no server is left running.
Result<LaunchedServer> LaunchServer(const LaunchSpec& spec);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_PEERS_SERVER_PROCESS_H_
