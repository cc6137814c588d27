// A spoold of one's own (docs/server.md, "Your own spoold"), outside
// spool's tree: the installed <spool/http/...> headers and libspool_http.
// It serves the queue in argv[1] on a free loopback port with the built-in
// handlers and one of its own, asks itself GET /readyz and POST /v1/tasks
// over a socket, waits for the task to run, and prints what it saw.
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <spool/http/builtin_handlers.h>
#include <spool/http/http_server.h>
#include <spool/http/spoold_config.h>
#include <spool/runtime.h>
#include <spool/version.h>

namespace {

int Fail(const char* step, const std::string& what) {
  std::fprintf(stderr, "own_spoold: %s: %s\n", step, what.c_str());
  return 1;
}

// One request over a fresh connection; the whole answer.
std::string Ask(uint16_t port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      send(fd, request.data(), request.size(), 0) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0)
      answer.append(buffer, n);
  }
  close(fd);
  return answer;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: own_spoold DIR\n");
    return 2;
  }
  std::printf("spool %s\n", spool::Version());
  // The config as spoold loads it, from overrides only here.
  spool::http::SpooldConfig config;
  spool::Status s = spool::http::LoadSpooldConfig(
      "",
      {"storage.path=" + std::string(argv[1]), "server.listen=127.0.0.1:0",
       "handlers.sleep.enabled=false"},
      &config);
  if (!s.ok()) return Fail("config", s.ToString());

  std::unique_ptr<spool::http::HttpServer> server;
  s = spool::http::HttpServer::Create(config.server, &server);
  if (s.ok()) s = server->Start();
  if (!s.ok()) return Fail("server", s.ToString());
  config.runtime.callback_executor = server->executor();
  std::unique_ptr<spool::Runtime> runtime;
  s = spool::Runtime::Open(config.runtime, &runtime);
  if (!s.ok()) return Fail("open", s.ToString());

  std::atomic<int> runs{0};
  s = runtime->RegisterHandler("mine", [&](spool::TaskContext&) {
    runs.fetch_add(1);
    return spool::Status::OK();
  });
  if (s.ok())
    s = spool::http::RegisterBuiltinHandlers(runtime.get(), config.handlers);
  if (s.ok()) s = runtime->Start();
  if (!s.ok()) return Fail("start", s.ToString());
  server->AttachRuntime(runtime.get());

  std::string ready = Ask(
      server->port(),
      "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (ready.rfind("HTTP/1.1 200", 0) != 0) return Fail("readyz", ready);
  std::printf("readyz 200\n");
  // No token file: a mutation is refused, as documented.
  std::string post =
      Ask(server->port(),
          "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
          "Content-Length: 15\r\n\r\n{\"type\":\"mine\"}");
  if (post.rfind("HTTP/1.1 403", 0) != 0) return Fail("post", post);
  spool::Result<spool::TaskId> id = runtime->Enqueue("mine", "").stored.Wait();
  if (!id.ok()) return Fail("enqueue", id.status().ToString());
  // The handler returns before its outcome is committed: wait for the
  // stored status, not for the handler's counter (bounded: 10 s).
  std::string task;
  for (int i = 0; i < 1000; ++i) {
    task = Ask(server->port(),
               "GET /v1/tasks/" + std::to_string(*id) +
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (task.find("\"status\":\"succeeded\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server->Stop();
  spool::Result<void> closed = runtime->Close().Wait();
  server.reset();
  if (!closed.ok()) return Fail("close", closed.status().ToString());
  if (runs.load() != 1 ||
      task.find("\"status\":\"succeeded\"") == std::string::npos)
    return Fail("task", "runs=" + std::to_string(runs.load()) + " " + task);
  std::printf("task %llu succeeded\n", static_cast<unsigned long long>(*id));
  return 0;
}
