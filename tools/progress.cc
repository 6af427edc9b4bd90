#include "tools/progress.h"

#include <stdio.h>
#include <unistd.h>

#include <iostream>

namespace ncclwatch::tools {

bool IsTerminal(int fd) { return isatty(fd) == 1; }

std::ostream* ProgressStream(std::ostream& err) {
  return &err == &std::cerr && IsTerminal(STDERR_FILENO) ? &err : nullptr;
}

std::string WithThousands(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string FormatBytes(uint64_t n) {
  char buf[32];
  if (n >= 1000ull * 1000 * 1000) snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(n) / 1e9);
  else if (n >= 1000ull * 1000) snprintf(buf, sizeof(buf), "%.0f MB", static_cast<double>(n) / 1e6);
  else if (n >= 1000) snprintf(buf, sizeof(buf), "%.0f KB", static_cast<double>(n) / 1e3);
  else snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

std::string FormatProgress(const std::string& what, uint64_t done, uint64_t total, const char* unit,
                           double elapsed_sec) {
  std::string s = what;
  if (total > 0) {
    const uint64_t pct = done >= total ? 100 : done * 100 / total;
    s += " " + std::to_string(pct) + "% (" + WithThousands(done) + " of " + WithThousands(total) + " " + unit + ")";
  }
  char t[32];
  snprintf(t, sizeof(t), ", %.0f s", elapsed_sec < 0 ? 0.0 : elapsed_sec);
  return s + t;
}

Progress::Progress(std::ostream* out) : out_(out) {}

Progress::~Progress() { Done(); }

void Progress::Draw(const std::string& line) {
  // Pad over what was there, so a shorter line leaves nothing behind.
  std::string padded = "\r" + line;
  if (line.size() < drawn_) padded += std::string(drawn_ - line.size(), ' ');
  *out_ << padded << std::flush;
  drawn_ = line.size();
}

void Progress::Wait(const std::string& what) {
  if (out_ == nullptr) return;
  StopTicker();
  std::unique_lock<std::mutex> lock(mutex_);
  waiting_ = what;
  stage_start_ = Clock::now();
  stop_ = false;
  Draw(FormatProgress(what, 0, 0, "", 0));
  lock.unlock();
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mutex_);
    while (!stop_) {
      wake_.wait_for(l, std::chrono::seconds(1));
      if (stop_) break;
      Draw(FormatProgress(waiting_, 0, 0, "",
                          std::chrono::duration<double>(Clock::now() - stage_start_).count()));
    }
  });
}

void Progress::Count(const std::string& what, uint64_t done, uint64_t total, const char* unit) {
  if (out_ == nullptr) return;
  StopTicker();
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = Clock::now();
  if (waiting_ != what) {  // a new stage
    waiting_ = what;
    stage_start_ = now;
  } else if (done < total && now - last_draw_ < std::chrono::milliseconds(200)) {
    return;
  }
  last_draw_ = now;
  Draw(FormatProgress(what, done, total, unit, std::chrono::duration<double>(now - stage_start_).count()));
}

void Progress::StopTicker() {
  if (!ticker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  ticker_.join();
}

void Progress::Done() {
  if (out_ == nullptr) return;
  StopTicker();
  std::lock_guard<std::mutex> lock(mutex_);
  if (drawn_ > 0) *out_ << "\r" << std::string(drawn_, ' ') << "\r" << std::flush;
  drawn_ = 0;
  waiting_.clear();
}

}  // namespace ncclwatch::tools
