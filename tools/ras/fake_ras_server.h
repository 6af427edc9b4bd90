// FakeRasServer: a thread on a loopback port that speaks NCCL's RAS client
// protocol as src/ras/client_support.cc does (CLIENT PROTOCOL, TIMEOUT,
// SET FORMAT, STATUS / VERBOSE STATUS, then the report and a close), or
// misbehaves in one of the ways a real port can. It serves one connection
// after another until destroyed. For tests only.
//
// Thread safety: heard() may be called from any thread.

#ifndef TOOLS_RAS_FAKE_RAS_SERVER_H_
#define TOOLS_RAS_FAKE_RAS_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ncclwatch::tools {

class FakeRasServer {
 public:
  enum Mode {
    kJson,        // NCCL 2.28.7 and later: the report in JSON when asked
    kTextOnly,    // before: SET FORMAT is an unknown command
    kSilent,      // accepts, never answers
    kGarbage,     // not RAS
    kStallsBody,  // answers the handshake, sends half the report, never closes
  };

  // `json` is sent after SET FORMAT json was accepted, `text` otherwise.
  FakeRasServer(Mode mode, std::string text, std::string json = "")
      : mode_(mode), text_(std::move(text)), json_(std::move(json)) {
    listen_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(listen_, 4) == 0) {
      socklen_t len = sizeof(a);
      getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeRasServer() {
    stop_.store(true);
    thread_.join();
    close(listen_);
  }
  FakeRasServer(const FakeRasServer&) = delete;
  FakeRasServer& operator=(const FakeRasServer&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  // What clients said, one command a line, every connection in turn.
  std::vector<std::string> heard() const {
    std::lock_guard<std::mutex> l(mu_);
    return heard_;
  }

 private:
  void Serve() {
    while (!stop_.load()) {
      // Woken every 50 ms to see whether the test is over.
      pollfd p = {listen_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int fd = accept(listen_, nullptr, nullptr);
      if (fd < 0) continue;
      connections_.fetch_add(1);
      Converse(fd);
      close(fd);
    }
  }

  void Converse(int fd) {
    if (mode_ == kGarbage) Send(fd, "HTTP/1.1 400 Bad Request\r\n\r\n");
    bool json = false;
    std::string line;
    while (mode_ != kSilent && mode_ != kGarbage && ReadLine(fd, &line)) {
      {
        std::lock_guard<std::mutex> l(mu_);
        heard_.push_back(line);
      }
      if (line.rfind("CLIENT PROTOCOL ", 0) == 0) {
        Send(fd, "SERVER PROTOCOL 2\n");
      } else if (line.rfind("TIMEOUT ", 0) == 0) {
        Send(fd, "OK\n");
      } else if (line == "SET FORMAT json" && mode_ != kTextOnly) {
        json = true;
        Send(fd, "OK\n");
      } else if (line == "STATUS" || line == "VERBOSE STATUS") {
        const std::string& body = json ? json_ : text_;
        if (mode_ != kStallsBody) {
          Send(fd, body);
          return;
        }
        Send(fd, body.substr(0, body.size() / 2));
        break;
      } else {
        Send(fd, "ERROR: Unknown command " + line + "\n");
      }
    }
    // Until the client gives up and closes.
    char b[256];
    while (!stop_.load() && recv(fd, b, sizeof(b), 0) > 0) {
    }
  }

  static void Send(int fd, const std::string& s) { (void)!send(fd, s.data(), s.size(), MSG_NOSIGNAL); }
  static bool ReadLine(int fd, std::string* line) {
    line->clear();
    char c;
    while (recv(fd, &c, 1, 0) == 1) {
      if (c == '\n') return true;
      *line += c;
    }
    return false;
  }

  const Mode mode_;
  const std::string text_, json_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::vector<std::string> heard_;
  std::thread thread_;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_RAS_FAKE_RAS_SERVER_H_
