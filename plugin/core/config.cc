#include "plugin/core/config.h"

#include <errno.h>
#include <stdlib.h>

#include <cctype>

#include "plugin/abi/profiler_common.h"
#include "plugin/core/command_words.h"

namespace ncclwatch::plugin {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Strict unsigned parse: digits only (or 0x hex when `allow_hex`), no sign, no junk.
bool ParseU64(const std::string& s, bool allow_hex, uint64_t* out) {
  if (s.empty()) return false;
  int base = 10;
  size_t start = 0;
  if (allow_hex && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    start = 2;
  }
  for (size_t i = start; i < s.size(); ++i) {
    if (base == 10 && !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    if (base == 16 && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s.c_str() + start, &end, base);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (errno != 0 || end == nullptr || *end != '\0' || !(v >= 0) || v > 1e9) return false;
  *out = v;
  return true;
}

}  // namespace

// Without KernelPhase (v7), whatever the completion source: NCCL 2.31 reports
// a channel's phases only once the channel has completed, so they never say
// where a hung kernel waits, and each of a channel's three phases would cost
// NCCL's profiler thread three calls and the ring three records, for every
// operation. `kernelphase` in NCCLWATCH_EVENTS asks for them.
uint64_t DefaultMask() { return nccl::kColl | nccl::kP2p | nccl::kKernelCh; }

bool ParseEvents(const std::string& value, uint64_t* nccl_mask, uint32_t* raw_kinds, std::string* error) {
  uint64_t mask = 0;
  uint32_t raw = 0;
  std::string v = Lower(Trim(value));
  if (v.empty()) {
    *error = "empty";
    return false;
  }
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    std::string tok = Trim(v.substr(pos, comma - pos));
    pos = comma + 1;
    if (tok.empty()) continue;
    if (tok == "default") {
      mask |= DefaultMask();
      continue;
    }
    if (tok == "all") {
      for (const auto& i : kEventKinds) {
        mask |= i.mask;
        raw |= 1u << i.kind;
      }
      continue;
    }
    if (tok[0] >= '0' && tok[0] <= '9') {
      uint64_t m = 0;
      if (!ParseU64(tok, true, &m) || m == 0 || m >= (uint64_t{1} << 16)) {
        *error = "'" + tok + "' is not a mask of known event bits (1..0xffff)";
        return false;
      }
      mask |= m;
      for (const auto& i : kEventKinds)
        if (m & i.mask) raw |= 1u << i.kind;
      continue;
    }
    bool found = false;
    for (const auto& i : kEventKinds) {
      if (tok == i.name) {
        mask |= i.mask;
        raw |= 1u << i.kind;
        found = true;
      }
    }
    if (!found) {
      *error = "unknown event name '" + tok + "'";
      return false;
    }
  }
  if (mask == 0) {
    *error = "no events selected";
    return false;
  }
  // Raw Coll/P2p records are Op records, always written: not a separate kind.
  raw &= ~((1u << kEvColl) | (1u << kEvP2p));
  *nccl_mask = mask;
  *raw_kinds = raw;
  return true;
}

Config ParseConfig(const char* (*getenv_fn)(const char*)) {
  Config c;
  auto get = [&](const char* name) -> const char* {
    const char* v = getenv_fn(name);
    return (v != nullptr && v[0] != '\0') ? v : nullptr;
  };
  auto warn = [&](const char* name, const char* value, const std::string& why, const std::string& def) {
    c.warnings.push_back(std::string(name) + "='" + value + "' ignored: " + why + "; using " + def);
  };

  if (const char* v = get("NCCLWATCH_ENABLE")) {
    std::string s = Lower(Trim(v));
    if (s == "0" || s == "false" || s == "off" || s == "no") c.enabled = false;
    else if (!(s == "1" || s == "true" || s == "on" || s == "yes")) warn("NCCLWATCH_ENABLE", v, "not 0 or 1", "1");
  }
  if (const char* v = get("NCCLWATCH_DIR")) c.dir = v;

  c.nccl_mask = DefaultMask();
  c.raw_kinds = 0;
  if (const char* v = get("NCCLWATCH_EVENTS")) {
    std::string err;
    uint64_t m = 0;
    uint32_t r = 0;
    if (ParseEvents(v, &m, &r, &err)) {
      c.events = v;
      c.nccl_mask = m;
      c.raw_kinds = r;
    } else {
      warn("NCCLWATCH_EVENTS", v, err, "default");
    }
  }

  struct U32Var {
    const char* name;
    uint32_t* dst;
    uint64_t lo, hi;
  };
  U32Var u32s[] = {{"NCCLWATCH_FLUSH_MS", &c.flush_ms, 1, 60000},
                   {"NCCLWATCH_HEARTBEAT_MS", &c.heartbeat_ms, 10, 3600000},
                   {"NCCLWATCH_EVENT_INTERVAL_US", &c.event_interval_us, 0, kMaxEventIntervalUs}};
  for (auto& u : u32s) {
    if (const char* v = get(u.name)) {
      uint64_t x = 0;
      if (ParseU64(Trim(v), false, &x) && x >= u.lo && x <= u.hi) *u.dst = static_cast<uint32_t>(x);
      else
        warn(u.name, v,
             "not an integer in [" + std::to_string(u.lo) + ", " + std::to_string(u.hi) + "]",
             std::to_string(*u.dst));
    }
  }
  if (const char* v = get("NCCLWATCH_BUFFER_MB")) {
    uint64_t x = 0;
    if (ParseU64(Trim(v), false, &x) && x >= 1 && x <= 4096) c.buffer_mb = x;
    else warn("NCCLWATCH_BUFFER_MB", v, "not an integer in [1, 4096]", std::to_string(c.buffer_mb));
  }
  if (const char* v = get("NCCLWATCH_CLOCK")) {
    std::string s = Lower(Trim(v));
    if (s == "auto") c.clock = ClockMode::kAuto;
    else if (s == "tsc") c.clock = ClockMode::kTsc;
    else if (s == "monotonic") c.clock = ClockMode::kMonotonic;
    else if (s == "test") c.clock = ClockMode::kTest;
    else warn("NCCLWATCH_CLOCK", v, "not auto, tsc or monotonic", "auto");
  }
  if (const char* v = get("NCCLWATCH_COMPLETIONS")) {
    std::string s = Lower(Trim(v));
    if (s == "channels") c.completions = Completions::kChannels;
    else if (s == "events") c.completions = Completions::kEvents;
    else if (s == "auto") c.completions = Completions::kAuto;
    else warn("NCCLWATCH_COMPLETIONS", v, "not auto, channels or events", "auto");
  }
  if (const char* v = get("NCCLWATCH_START_EVENTS")) {
    std::string s = Lower(Trim(v));
    if (s == "0" || s == "false" || s == "off" || s == "no") c.start_events = false;
    else if (!(s == "1" || s == "true" || s == "on" || s == "yes")) warn("NCCLWATCH_START_EVENTS", v, "not 0 or 1", "1");
  }
  if (const char* v = get("NCCLWATCH_STUCK_SEC")) {
    double x = 0;
    if (ParseDouble(Trim(v), &x)) c.stuck_sec = x;
    else warn("NCCLWATCH_STUCK_SEC", v, "not a number of seconds >= 0", "60");
  }
  // Set but empty is a mistake worth a word too (other variables read
  // empty as unset): the user asked for a command and gets none.
  if (const char* v = getenv_fn("NCCLWATCH_ON_STUCK")) {
    std::string err;
    if (!SplitCommand(v, &c.on_stuck, &err)) {
      c.on_stuck.clear();
      warn("NCCLWATCH_ON_STUCK", v, err, "no command");
    }
  }
  if (const char* v = get("NCCLWATCH_ON_STUCK_TIMEOUT_SEC")) {
    double x = 0;
    if (ParseDouble(Trim(v), &x) && x > 0 && x <= 86400) c.on_stuck_timeout_sec = x;
    else warn("NCCLWATCH_ON_STUCK_TIMEOUT_SEC", v, "not a number of seconds in (0, 86400]", "60");
  }
  if (const char* v = get("NCCLWATCH_ON_STUCK_MAX_BYTES")) {
    uint64_t x = 0;
    if (ParseU64(Trim(v), false, &x) && x >= 1 && x <= (uint64_t{1} << 30)) c.on_stuck_max_bytes = x;
    else warn("NCCLWATCH_ON_STUCK_MAX_BYTES", v, "not an integer in [1, 1073741824]", "1048576");
  }
  if (const char* v = get("NCCLWATCH_FILE_MODE")) {
    // Octal digits only. Read and write bits only (no execute, setuid,
    // setgid or sticky bit), and the owner must keep reading and writing.
    const std::string s = Trim(v);
    bool octal = !s.empty() && s.size() <= 6;
    uint32_t m = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '7') octal = false;
      else m = m * 8 + static_cast<uint32_t>(ch - '0');
    }
    if (octal && (m & ~0666u) == 0 && (m & 0600u) == 0600u) c.file_mode = m;
    else warn("NCCLWATCH_FILE_MODE", v, "not an octal mode within 0666 that includes 0600", "0600");
  }
  return c;
}

}  // namespace ncclwatch::plugin
