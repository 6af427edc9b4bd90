// The plugin's configuration, read once from the environment in the first
// init. Every bad value gets one warning (collected in `warnings`, logged by
// the caller through NCCL's logger) and falls back to its default.
//
// Variables (defaults in Config below):
//   NCCLWATCH_DIR           where trace files go ("." if unset)
//   NCCLWATCH_EVENTS        which events: "default", "all", a comma list of
//                           event names, or a numeric mask (0x...). Names add
//                           raw records of that type to the file.
//   NCCLWATCH_FLUSH_MS      write(2) interval
//   NCCLWATCH_HEARTBEAT_MS  heartbeat interval
//   NCCLWATCH_STUCK_SEC     in-flight age that triggers a stuck report (0: off)
//   NCCLWATCH_ON_STUCK      a command run once at the first stuck report,
//                           split into words here (command_words.h) and run
//                           without a shell (plugin/writer/on_stuck.h)
//   NCCLWATCH_ON_STUCK_TIMEOUT_SEC  how long it may run before it is killed
//   NCCLWATCH_ON_STUCK_MAX_BYTES    how much of its output is kept
//   NCCLWATCH_FILE_MODE     the mode of the files the plugin creates (octal,
//                           within 0666 and at least 0600; default 0600)
//   NCCLWATCH_BUFFER_MB     memory for per-thread buffers and event handles
//   NCCLWATCH_ENABLE        0 turns the plugin off (init fails, NCCL runs on)
//   NCCLWATCH_COMPLETIONS   where completions come from: "auto" (default:
//                           events where the API (v5+) and the process's
//                           libcuda allow, else channels), "channels" (NCCL's
//                           kernel-channel events) or "events" (CUDA events
//                           at each kernel launch; API v5+, launch_events.h)
//   NCCLWATCH_START_EVENTS  with completions from events: 0 records no event
//                           before each kernel (half the cost; stuck reports
//                           then cannot tell "never started" from "started")
//   NCCLWATCH_EVENT_INTERVAL_US  with completions from events: 0 (default)
//                           records events at every kernel launch; N > 0
//                           records them at a launch only when N us have
//                           passed since the stream's last recorded ones.
//                           A launch without events of its own completes when
//                           a later launch's event on its stream does, and a
//                           stuck report names the window of operations the
//                           GPU may be in (launch_events.h, StreamEvents)
//   NCCLWATCH_CLOCK         how events are stamped: "auto" (the TSC where it is
//                           safe and clock_gettime would cost more), "tsc" or
//                           "monotonic" (clock_gettime); "test" for tests, a
//                           monotonic clock they step (clock.h)
//
// Thread safety: ParseConfig is pure; call it from any thread.

#ifndef PLUGIN_CORE_CONFIG_H_
#define PLUGIN_CORE_CONFIG_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "plugin/abi/event_kind.h"
#include "plugin/core/defaults.h"

namespace ncclwatch::plugin {

enum class ClockMode : uint8_t { kAuto = 0, kTsc = 1, kMonotonic = 2, kTest = 3 };
// kAuto: CUDA events where they can be had, kernel channels elsewhere, with
// no warning (NCCL before 2.28 and processes without libcuda are expected).
enum class Completions : uint8_t { kChannels = 0, kEvents = 1, kAuto = 2 };

// NCCLWATCH_EVENT_INTERVAL_US at most: one second.
inline constexpr uint32_t kMaxEventIntervalUs = 1000000;

struct Config {
  std::string dir = ".";
  std::string events = "default";
  uint64_t nccl_mask = 0;   // handed to NCCL
  uint32_t raw_kinds = 0;   // bit (1 << EventKind): write raw records for this kind
  uint32_t flush_ms = 100;
  uint32_t heartbeat_ms = 1000;
  double stuck_sec = kDefaultStuckSec;
  std::vector<std::string> on_stuck;  // the command's words (command_words.h); empty: none
  double on_stuck_timeout_sec = 60.0;
  uint64_t on_stuck_max_bytes = 1 << 20;
  uint32_t file_mode = 0600;  // of the trace and the command's output file
  uint64_t buffer_mb = 64;
  bool enabled = true;
  ClockMode clock = ClockMode::kAuto;
  Completions completions = Completions::kAuto;
  bool start_events = true;
  uint32_t event_interval_us = 0;  // 0: events at every launch
  std::vector<std::string> warnings;
};

// The default capture: collectives and point-to-point with their kernel
// channels, folded into one record per operation with its GPU timing.
uint64_t DefaultMask();

// Reads the variables through `getenv_fn` (getenv in production, a fake in tests).
Config ParseConfig(const char* (*getenv_fn)(const char*));

// Parses an NCCLWATCH_EVENTS value. Returns false with `error` set when bad.
bool ParseEvents(const std::string& value, uint64_t* nccl_mask, uint32_t* raw_kinds, std::string* error);

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_CONFIG_H_
