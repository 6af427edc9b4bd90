#include "tools/ras/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string_view>

#include "absl/strings/string_view.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace ncclwatch::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::string Secs(double s) {
  char b[32];
  snprintf(b, sizeof(b), "%g s", s);
  return b;
}

// A connected socket with a read buffer; closed with the object.
class Conn {
 public:
  ~Conn() {
    if (fd_ >= 0) close(fd_);
  }

  // False with `why` (strerror's words, or "no answer within ...").
  bool Connect(const sockaddr_storage& sa, socklen_t len, double sec, std::string* why) {
    fd_ = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Errno(why);
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&sa), len) == 0) return true;
    if (errno != EINPROGRESS) return Errno(why);
    if (!Wait(POLLOUT, Clock::now() + Dur(sec), why)) {
      if (why->empty()) *why = "no connection within " + Secs(sec);
      return false;
    }
    int err = 0;
    socklen_t el = sizeof(err);
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &el) != 0) return Errno(why);
    if (err != 0) {
      *why = strerror(err);
      return false;
    }
    return true;
  }

  bool Send(const std::string& line, double sec, std::string* why) {
    const Clock::time_point until = Clock::now() + Dur(sec);
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!Wait(POLLOUT, until, why)) {
          if (why->empty()) *why = "could not send within " + Secs(sec);
          return false;
        }
      } else {
        return Errno(why);
      }
    }
    return true;
  }

  // One line, without its newline; false at a deadline, an error or the
  // end (`why` says which).
  bool ReadLine(double sec, std::string* line, std::string* why) {
    const Clock::time_point until = Clock::now() + Dur(sec);
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        *line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return true;
      }
      if (buf_.size() > 4096) {
        *why = "a line of more than 4 KiB";
        return false;
      }
      bool eof = false;
      if (!Fill(until, &eof, why)) {
        if (why->empty()) *why = "no answer within " + Secs(sec);
        return false;
      }
      if (eof) {
        *why = buf_.empty() ? "the connection was closed" : "the connection was closed mid-line";
        return false;
      }
    }
  }

  // Everything until the server closes, at most `max` bytes.
  bool ReadAll(double sec, uint64_t max, std::string* body, std::string* why) {
    const Clock::time_point until = Clock::now() + Dur(sec);
    for (;;) {
      if (buf_.size() > max) {
        *why = "an answer of more than " + std::to_string(max >> 20) + " MiB";
        return false;
      }
      bool eof = false;
      if (!Fill(until, &eof, why)) {
        if (why->empty()) *why = "answer not complete within " + Secs(sec) + " (" + std::to_string(buf_.size()) + " bytes read)";
        return false;
      }
      if (eof) break;
    }
    body->swap(buf_);
    buf_.clear();
    return true;
  }

 private:
  static Clock::duration Dur(double sec) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sec));
  }
  bool Errno(std::string* why) {
    *why = strerror(errno);
    return false;
  }
  // Waits for `events` until `until`; false with `why` empty at the deadline.
  bool Wait(short events, Clock::time_point until, std::string* why) {
    why->clear();
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p = {fd_, events, 0};
      const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 60000)));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return Errno(why);
    }
  }
  bool Fill(Clock::time_point until, bool* eof, std::string* why) {
    for (;;) {
      char b[65536];
      const ssize_t n = recv(fd_, b, sizeof(b), 0);
      if (n > 0) {
        buf_.append(b, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) {
        *eof = true;
        return true;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Errno(why);
      if (!Wait(POLLIN, until, why)) return false;
    }
  }

  int fd_ = -1;
  std::string buf_;
};

bool Resolve(const std::string& host, int port, sockaddr_storage* sa, socklen_t* len) {
  *sa = sockaddr_storage();
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  auto* v4 = reinterpret_cast<sockaddr_in*>(sa);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(sa);
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

bool ParseRasAddress(const std::string& address, std::string* host, int* port, std::string* error) {
  absl::string_view a = absl::StripAsciiWhitespace(address);
  absl::string_view h = a, p;
  if (absl::StartsWith(a, "[")) {
    const size_t close = a.find(']');
    if (close == absl::string_view::npos) {
      *error = "RAS address '" + address + "': an IPv6 address needs its closing ']'";
      return false;
    }
    h = a.substr(1, close - 1);
    p = a.substr(close + 1);
    if (!p.empty() && !absl::ConsumePrefix(&p, ":")) {
      *error = "RAS address '" + address + "': expected ':PORT' after ']'";
      return false;
    }
  } else if (std::count(a.begin(), a.end(), ':') == 1) {
    h = a.substr(0, a.find(':'));
    p = a.substr(a.find(':') + 1);
  }
  *host = h.empty() ? "127.0.0.1" : std::string(h);
  *port = 28028;
  if (!p.empty() && (!absl::SimpleAtoi(p, port) || *port < 1 || *port > 65535)) {
    *error = "RAS address '" + address + "': the port must be a number from 1 to 65535";
    return false;
  }
  sockaddr_storage sa;
  socklen_t len;
  if (!Resolve(*host, *port, &sa, &len)) {
    *error = "RAS address '" + address + "': give a numeric IP address (or localhost); names are not resolved";
    return false;
  }
  return true;
}

RasAnswer QueryRas(const std::string& address, const RasQueryOptions& opts) {
  RasAnswer r;
  std::string host, why;
  int port = 0;
  if (!ParseRasAddress(address, &host, &port, &r.error)) return r;
  r.address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  sockaddr_storage sa;
  socklen_t len = 0;
  Resolve(host, port, &sa, &len);
  Conn c;
  if (!c.Connect(sa, len, opts.connect_sec, &why)) {
    r.error = "RAS not reachable at " + r.address + ": " + why;
    return r;
  }
  const std::string at = "RAS at " + r.address + ": ";
  std::string line;
  // One command and its one-line answer.
  auto ask = [&](const std::string& cmd) {
    if (!c.Send(cmd + "\n", opts.handshake_sec, &why) || !c.ReadLine(opts.handshake_sec, &line, &why)) {
      r.error = at + why + " (after " + cmd + ")";
      return false;
    }
    return true;
  };
  if (!ask("CLIENT PROTOCOL 2")) return r;
  if (!absl::StartsWithIgnoreCase(line, "SERVER PROTOCOL ")) {
    r.error = at + "not NCCL's RAS: it answered '" + line.substr(0, 100) + "' to CLIENT PROTOCOL";
    return r;
  }
  if (!ask("TIMEOUT " + std::to_string(opts.ras_timeout_sec))) return r;
  if (!absl::EqualsIgnoreCase(line, "OK")) {
    r.error = at + "it answered '" + line.substr(0, 100) + "' to TIMEOUT";
    return r;
  }
  if (opts.prefer_json) {
    if (!ask("SET FORMAT json")) return r;
    r.json = absl::EqualsIgnoreCase(line, "OK");
    // NCCL before 2.28.7: "ERROR: Unknown command set format json"; the
    // connection goes on.
    if (!r.json) r.format_note = "SET FORMAT json refused (NCCL before 2.28.7): " + line.substr(0, 100);
  }
  const std::string status = r.json ? "STATUS" : "VERBOSE STATUS";
  if (!c.Send(status + "\n", opts.handshake_sec, &why) || !c.ReadAll(opts.answer_sec, opts.max_bytes, &r.body, &why)) {
    r.error = at + why + " (after " + status + ")";
    r.body.clear();
    return r;
  }
  if (r.body.empty()) {
    r.error = at + "an empty answer to " + status;
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace ncclwatch::tools
