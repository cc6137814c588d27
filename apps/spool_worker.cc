// spool-worker: runs tasks for a spool runtime on another machine
// (docs/scale-out.md), through spool::RemoteWorker.
//
//   spool-worker --connect HOST:PORT[,HOST:PORT...] --secret-file F
//                [--types noop,sleep]
//                [--concurrency N] [--node NAME] [--config FILE] [--log FILE]
//                [--reconnect-max-ms M] [--close-timeout-ms M]
//                [--tls-certificate PEM --tls-key PEM --tls-ca PEM]
//
// Serves the built-in `noop` (succeeds at once), `sleep` (the payload:
// milliseconds, as text) and `http.post` (webhook delivery, spoold's
// handler from spool::http: docs/server.md) handlers. http.post takes its
// settings from the [handlers."http.post"] table of the --config file, the
// TOML file spoold reads (read by spool::http::LoadSpooldConfig, so spoold's
// own file will do; its other sections are checked and not used), and is
// refused unless that table sets an allow-list. --log appends
// "TASK ATTEMPT" for every attempt started, for tests. --reconnect-max-ms
// caps the backoff between reconnection attempts (RemoteWorkerOptions::
// reconnect_max, default 5000), for a queue node that restarts often
// (spool-torture --remote-workers). The --tls-* files connect over TLS to
// a gateway with remote.tls_* set (RemoteWorkerOptions::tls_*). Runs until
// SIGINT or SIGTERM.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <signal.h>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/http/builtin_handlers.h>
#include <spool/http/spoold_config.h>
#include <spool/remote_worker.h>

namespace {

std::atomic<bool> g_stop{false};

struct Args {
  spool::RemoteWorkerOptions options;
  std::vector<std::string> types{"noop", "sleep"};
  std::string config;
  std::string log;
  std::chrono::milliseconds close_timeout{10000};
};

// Writes `text` to stderr in one piece, so that no log line cuts into it.
void Say(const std::string& text) {
  std::string line = "spool-worker: " + text + "\n";
  ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  (void)n;
}

int Usage(const std::string& why) {
  std::cerr << "spool-worker: " + why +
                   "\nusage: spool-worker --connect HOST:PORT[,HOST:PORT...] "
                   "--secret-file F "
                   "[--types noop,sleep,http.post] [--concurrency N] "
                   "[--node NAME] [--config FILE] [--log FILE] "
                   "[--reconnect-max-ms M] [--close-timeout-ms M] "
                   "[--tls-certificate PEM --tls-key PEM --tls-ca PEM]\n"
                   "  --config: spoold's TOML file; http.post needs its "
                   "[handlers.\"http.post\"] allow\n"
            << std::flush;
  return 2;
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Parses `value`, the value of `flag`, as an integer in [min, max] into
// *out; returns the error, or "" when it parsed.
std::string ParseInteger(const std::string& flag, const std::string& value,
                         long min, long max, long* out) {
  char* end = nullptr;
  long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < min || n > max) {
    return flag + " must be an integer in [" + std::to_string(min) + ", " +
           std::to_string(max) + "], got " + value;
  }
  *out = n;
  return "";
}

// Parses argv into *args; returns the error, or "" when it parsed.
std::string Parse(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return flag + " needs a value";
    std::string value = argv[++i];
    if (flag == "--connect") {
      args->options.connect = value;
    } else if (flag == "--secret-file") {
      args->options.secret_file = value;
    } else if (flag == "--types") {
      args->types = Split(value);
    } else if (flag == "--concurrency") {
      long n = 0;
      std::string bad = ParseInteger(flag, value, 1, 4096, &n);
      if (!bad.empty()) return bad;
      args->options.concurrency = static_cast<uint32_t>(n);
    } else if (flag == "--reconnect-max-ms") {
      long n = 0;
      std::string bad = ParseInteger(flag, value, 1, 600000, &n);
      if (!bad.empty()) return bad;
      args->options.reconnect_max = std::chrono::milliseconds(n);
    } else if (flag == "--close-timeout-ms") {
      long n = 0;
      std::string bad = ParseInteger(flag, value, 0, 3'600'000, &n);
      if (!bad.empty()) return bad;
      args->close_timeout = std::chrono::milliseconds(n);
    } else if (flag == "--node") {
      args->options.node = value;
    } else if (flag == "--tls-certificate") {
      args->options.tls_certificate_file = value;
    } else if (flag == "--tls-key") {
      args->options.tls_key_file = value;
    } else if (flag == "--tls-ca") {
      args->options.tls_ca_file = value;
    } else if (flag == "--config") {
      args->config = value;
    } else if (flag == "--log") {
      args->log = value;
    } else {
      return "unknown flag " + flag;
    }
  }
  if (args->options.connect.empty()) return "--connect is required";
  if (args->types.empty()) return "--types names no type";
  return "";
}

// Appends "TASK ATTEMPT\n" in one write, so that lines of several
// processes do not interleave.
void LogStart(int fd, const spool::TaskContext& task) {
  if (fd < 0) return;
  std::string line =
      std::to_string(task.id()) + " " + std::to_string(task.attempt()) + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
}

// spoold's sleep, with spoold's parser: milliseconds up to spool::kMaxDelay,
// anything else InvalidArgument, which the sleep type's retry_if (below)
// does not retry.
spool::Status Sleep(spool::TaskContext& task) {
  spool::Result<std::chrono::milliseconds> ms =
      spool::http::ParseSleepPayload(task.payload());
  if (!ms.ok()) return ms.status();
  if (task.WaitForCancelOrStop(*ms)) {
    if (task.stopping() && !task.cancelled()) {
      return spool::Status::Aborted("sleep: the worker is stopping");
    }
    return spool::Status::Cancelled("sleep: cancelled");
  }
  return spool::Status::OK();
}

// spoold's http.post handler with the settings of `config`'s
// [handlers."http.post"] table (read from `path`, "" when no --config was
// given), or why it cannot be served.
spool::Result<spool::http::BuiltinHandler> HttpPost(
    const spool::http::SpooldConfig& config, const std::string& path) {
  const spool::http::BuiltinHandlersOptions& handlers = config.handlers;
  std::string where = path.empty() ? std::string("no --config file was given")
                                   : path + " sets none";
  if (!handlers.http_post.enabled) {
    return spool::Status::InvalidArgument(
        "--types has http.post, but " + path +
        " sets handlers.\"http.post\".enabled = false");
  }
  if (handlers.http_post_options.allow.empty()) {
    return spool::Status::InvalidArgument(
        "--types has http.post, which needs the URLs it may post to: an "
        "allow list in the [handlers.\"http.post\"] table of the --config "
        "file, and " +
        where);
  }
  return spool::http::MakeBuiltinHandler(spool::http::kHttpPostHandler,
                                         handlers);
}

// SIGINT and SIGTERM, blocked in every thread (those CAF starts later
// inherit the mask) and taken by one thread of their own: it sets g_stop,
// which main's loop polls, and gives the whole shutdown the close timeout
// and a second. Close waits for handlers that see TaskContext::stopping
// and for CAF's connection to the gateway, which a blocking connect may
// hold while the gateway is unreachable or silent; and Connect itself may
// take connect_timeout. Past the bound, the process exits. Nothing is
// lost: the gateway settles the attempts still leased here as interrupted
// when their leases run out.
void WatchStopSignals(std::chrono::milliseconds close_timeout) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::thread([stop_signals, close_timeout] {
    int received = 0;
    while (sigwait(&stop_signals, &received) != 0) {
    }
    g_stop.store(true);
    std::this_thread::sleep_for(close_timeout + std::chrono::seconds(1));
    Say("closing took over --close-timeout-ms (" +
        std::to_string(close_timeout.count()) +
        " ms); exiting, the gateway runs the leased tasks again");
    std::_Exit(1);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  std::string error = Parse(argc, argv, &args);
  if (!error.empty()) return Usage(error);
  WatchStopSignals(args.close_timeout);
  int log_fd = -1;
  if (!args.log.empty()) {
    log_fd = ::open(args.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log_fd < 0) return Usage(args.log + ": " + std::strerror(errno));
  }
  spool::http::SpooldConfig config;
  // spoold's default, for a file with no [storage] path: the worker holds
  // no queue and opens nothing there, but the runtime's sections must
  // validate as spoold's would.
  config.runtime.path = "./spool-data";
  if (!args.config.empty()) {
    spool::Status s = spool::http::LoadSpooldConfig(args.config, {}, &config);
    if (!s.ok()) return Usage(s.ToString());
  }
  std::unique_ptr<spool::RemoteWorker> worker;
  spool::Status s = spool::RemoteWorker::Create(args.options, &worker);
  if (!s.ok()) return Usage(s.ToString());
  for (const std::string& type : args.types) {
    spool::Handler handler;
    spool::HandlerOptions handler_options;
    if (type == spool::http::kHttpPostHandler) {
      spool::Result<spool::http::BuiltinHandler> post =
          HttpPost(config, args.config);
      if (!post.ok()) return Usage(post.status().ToString());
      handler = [log_fd,
                 run = std::move(post->handler)](spool::TaskContext& task) {
        LogStart(log_fd, task);
        return run(task);
      };
      handler_options = std::move(post->options);
    } else if (type == "noop") {
      handler = [log_fd](spool::TaskContext& task) {
        LogStart(log_fd, task);
        return spool::Status::OK();
      };
    } else if (type == "sleep") {
      handler = [log_fd](spool::TaskContext& task) {
        LogStart(log_fd, task);
        return Sleep(task);
      };
      handler_options.retry_if = [](const spool::Status& failure) {
        return !failure.IsInvalidArgument();
      };
    } else {
      return Usage("no built-in handler " + type +
                   " (spool-worker serves noop, sleep and http.post)");
    }
    s = worker->RegisterHandler(type, std::move(handler),
                                std::move(handler_options));
    if (!s.ok()) return Usage(s.ToString());
  }
  s = worker->Connect();
  if (s.IsInvalidArgument()) {
    Say(s.ToString());
    // Refused: nothing runs and nothing is owed, so exit at once rather
    // than through Close (which once hung here under load; see the report
    // of issue 12).
    std::_Exit(3);
  }
  if (!s.ok()) Say(s.ToString());
  std::cout << "spool-worker: connected to " << args.options.connect
            << std::endl;
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  s = worker->Close(args.close_timeout);
  std::cout << "spool-worker: finished=" << worker->finished()
            << " reconnects=" << worker->reconnects() << std::endl;
  if (log_fd >= 0) ::close(log_fd);
  if (s.IsTimedOut()) {
    // Handlers that ignore stopping would hold the destructor: the
    // gateway already knows, so the process ends without them.
    Say(s.ToString());
    std::_Exit(1);
  }
  return s.ok() ? 0 : 1;
}
