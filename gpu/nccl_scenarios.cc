// nccl_scenarios: a multi-GPU NCCL workload with injectable faults, used to
// produce real ncclwatch traces on a GPU machine (no Bazel needed there; see
// gpu/build.sh and gpu/README.md).
//
//   nccl_scenarios --nranks N --scenario NAME [--steps S] [--timeout-sec T]
//                  [--out-dir DIR] [--sizes small|full] [--nonblocking]
//                  [--fault-rank R] [--fault-step K] [--delay-ms D]
//                  [--init-timeout-sec I] [--log-every E] [--list-scenarios]
//
// Process layout. The parent creates the ncclUniqueId (this needs no CUDA: it
// only starts NCCL's bootstrap root, a thread that stays in the parent and
// serves the rendezvous), then forks N children. The parent never touches
// CUDA. Child r uses device r, joins the "world" communicator and splits it
// into "tp" (color r/2: ranks in pairs) and "dp" (color r%2). Each step mixes
// an all_reduce on world, an all_gather on tp, a reduce_scatter on dp, a
// broadcast on world (root = step % N) and a send/recv ring on world in one
// NCCL group, then waits for the stream.
//
// Watchdog (per child, modelled on a framework's NCCL watchdog):
//  * The main thread never blocks in cudaStreamSynchronize: it polls
//    cudaStreamQuery, so it can notice that the watchdog has fired and park.
//  * A watchdog thread holds a deadline that the main thread arms at the start
//    of each step (and around init and teardown) and disarms when the step's
//    work has completed. Every 20 ms it also polls ncclCommGetAsyncError on
//    every communicator (what PyTorch's watchdog does from its own thread).
//  * On a passed deadline it prints
//      [rank r] watchdog: collective timed out after T s, aborting
//    calls ncclCommAbort on every communicator, all at once from one thread
//    each (sequential aborts can deadlock: see Watchdog::Fire), and then
//    _exit(124). An asynchronous NCCL error does
//    the same with status 125. A host-side hang (a blocking NCCL call waiting
//    on a peer, e.g. lazy connection setup) is covered too, since the deadline
//    lives in the other thread.
//  * Aborting while the main thread is still inside an NCCL call is what NCCL
//    abort is for, but it is the risky part, so two backstops keep the exit
//    status meaningful: a reaper thread _exit()s with the same status if the
//    aborts have not returned within 10 s, and a SIGSEGV/SIGBUS/SIGABRT
//    handler _exit()s with that status if the process crashes after firing.
//  * _exit skips static destructors on purpose: other threads may still be
//    inside NCCL. The ncclwatch plugin sees the aborts (NCCL finalizes the
//    profiler while freeing an aborted communicator) and its periodic flushes
//    are in the page cache already.
//  * --nonblocking makes the communicators non-blocking (config.blocking=0);
//    every NCCL call is then followed by polling ncclCommGetAsyncError until
//    the communicator is ready, so even host-side waits happen in our loops.
//
// Exit status. Child: 0 ok, 1 CUDA/NCCL/setup error (comms aborted first),
// 124 watchdog timeout, 125 asynchronous NCCL error. Parent: 0 when every
// child exited 0, else 1 (2 for a usage error); it prints each child's exit
// status or signal. Once a child has exited, the parent gives the others
// T+5 s to finish (their watchdogs fire first), then SIGKILLs them; a child
// stopped by a signal (net-stall) is killed as soon as every other child has
// exited. Children die with the parent (PR_SET_PDEATHSIG).
//
// Scenarios are a table of name -> hooks (kScenarios in scenario_table.cc,
// which says how a new fault is added).
//
// Files: this one is the parent (options, fork, reaping, scenario.json);
// scenario.h the shared types; scenario_ops.cc the ops of a step;
// scenario_table.cc the scenarios; scenario_rank.cc a forked rank;
// scenario_watchdog.{h,cc} its watchdog.

#include <nccl.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"
#include "scenario_watchdog.h"

namespace ncclwatch::scenarios {
namespace {

constexpr int kParentGraceSec = 5;  // parent: kill the rest T + this after a failure

void Usage(FILE* f) {
  fprintf(f,
          "usage: nccl_scenarios --nranks N --scenario NAME [--steps S] [--timeout-sec T]\n"
          "                      [--out-dir DIR] [--sizes small|full] [--nonblocking]\n"
          "                      [--fault-rank R] [--fault-step K] [--delay-ms D]\n"
          "                      [--init-timeout-sec I] [--log-every E] [--list-scenarios]\n"
          "  --nranks N           processes/GPUs (rank r uses device r)\n"
          "  --scenario NAME      see --list-scenarios\n"
          "  --steps S            training-like steps (default 20)\n"
          "  --timeout-sec T      per-step watchdog timeout (default 30)\n"
          "  --init-timeout-sec I watchdog timeout for init (default max(T, 60))\n"
          "  --out-dir DIR        create DIR, write DIR/scenario.json, and default\n"
          "                       NCCLWATCH_DIR to DIR when it is unset\n"
          "  --sizes small|full   cap buffers at 1 MiB (small) or 64 MiB (full, default)\n"
          "  --nonblocking        non-blocking communicators (config.blocking=0)\n"
          "  --fault-rank R       the faulty rank (default: the scenario's)\n"
          "  --fault-step K       the faulty step (default: S/2)\n"
          "  --delay-ms D         straggler delay (default 50), net-stall SIGSTOP delay\n"
          "                       (default 10)\n"
          "  --log-every E        progress line every E steps (default 1, 0: none)\n"
          "exit status: 0 if every rank exited 0, 1 otherwise, 2 on a usage error.\n"
          "ranks exit 0 ok, 1 error, 124 watchdog timeout, 125 async NCCL error.\n");
}

bool ParseInt(const char* s, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < INT32_MIN || v > INT32_MAX) return false;
  *out = int(v);
  return true;
}

bool ParseDouble(const char* s, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

// Returns kExitOk, or kExitUsage after printing why; -1 for "done, exit 0".
int ParseArgs(int argc, char** argv, Options* o) {
  auto bad = [](const char* flag, const char* val) {
    fprintf(stderr, "nccl_scenarios: bad value for %s: '%s'\n", flag, val ? val : "(missing)");
    return int(kExitUsage);
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&]() { return v != nullptr && (++i, true); };
    if (a == "-h" || a == "--help") { Usage(stdout); return -1; }
    if (a == "--list-scenarios") { ListScenarios(); return -1; }
    if (a == "--nonblocking") { o->nonblocking = true; continue; }
    if (a == "--nranks") { if (!need() || !ParseInt(v, &o->nranks) || o->nranks < 1) return bad("--nranks", v); continue; }
    if (a == "--scenario") { if (!need()) return bad("--scenario", v); o->scenario = v; continue; }
    if (a == "--steps") { if (!need() || !ParseInt(v, &o->steps) || o->steps < 1) return bad("--steps", v); continue; }
    if (a == "--timeout-sec") { if (!need() || !ParseDouble(v, &o->timeout_sec) || !(o->timeout_sec > 0)) return bad("--timeout-sec", v); continue; }
    if (a == "--init-timeout-sec") { if (!need() || !ParseDouble(v, &o->init_timeout_sec) || !(o->init_timeout_sec > 0)) return bad("--init-timeout-sec", v); continue; }
    if (a == "--out-dir") { if (!need() || !*v) return bad("--out-dir", v); o->out_dir = v; continue; }
    if (a == "--sizes") {
      if (!need()) return bad("--sizes", v);
      if (std::string(v) == "small") o->max_bytes = kSmallMaxBytes;
      else if (std::string(v) == "full") o->max_bytes = kFullMaxBytes;
      else return bad("--sizes", v);
      continue;
    }
    if (a == "--fault-rank") { if (!need() || !ParseInt(v, &o->fault_rank) || o->fault_rank < 0) return bad("--fault-rank", v); continue; }
    if (a == "--fault-step") { if (!need() || !ParseInt(v, &o->fault_step) || o->fault_step < 0) return bad("--fault-step", v); continue; }
    if (a == "--delay-ms") { if (!need() || !ParseInt(v, &o->delay_ms) || o->delay_ms < 0) return bad("--delay-ms", v); continue; }
    if (a == "--log-every") { if (!need() || !ParseInt(v, &o->log_every) || o->log_every < 0) return bad("--log-every", v); continue; }
    fprintf(stderr, "nccl_scenarios: unknown argument '%s'\n", a.c_str());
    Usage(stderr);
    return kExitUsage;
  }
  if (o->nranks < 1 || o->scenario.empty()) {
    fprintf(stderr, "nccl_scenarios: --nranks and --scenario are required\n");
    Usage(stderr);
    return kExitUsage;
  }
  if (o->init_timeout_sec <= 0) o->init_timeout_sec = std::max(o->timeout_sec, 60.0);
  return kExitOk;
}

bool MakeDirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

struct ChildState {
  pid_t pid = -1;
  bool running = true;
  bool stopped = false;      // by a signal (SIGSTOP), seen through WUNTRACED
  bool was_stopped = false;  // stopped at some point
  int status = 0;
  bool killed_by_parent = false;
};

std::string DescribeStatus(const ChildState& c) {
  char buf[160];
  if (WIFEXITED(c.status)) {
    int code = WEXITSTATUS(c.status);
    const char* what = code == kExitOk ? "ok"
                       : code == kExitTimeout ? "watchdog timeout"
                       : code == kExitAsyncError ? "async NCCL error"
                       : "error";
    snprintf(buf, sizeof(buf), "exited with status %d (%s)", code, what);
  } else if (WIFSIGNALED(c.status)) {
    int sig = WTERMSIG(c.status);
    snprintf(buf, sizeof(buf), "killed by signal %d (%s)%s%s", sig, strsignal(sig),
             c.killed_by_parent ? " sent by the parent" : "",
             c.was_stopped ? " while stopped" : "");
  } else {
    snprintf(buf, sizeof(buf), "raw wait status 0x%x", c.status);
  }
  return buf;
}

std::string JsonString(const char* v) {
  std::string out = "\"";
  for (const char* p = v; *p; ++p) {
    unsigned char ch = static_cast<unsigned char>(*p);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

void WriteSummary(const Options& o, const Scenario& scen, int nccl_version,
                  const std::vector<ChildState>& kids, int parent_status, double wall_sec) {
  std::string path = o.out_dir + "/scenario.json";
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    Log("cannot write %s: %s", path.c_str(), strerror(errno));
    return;
  }
  const bool faulty = HasFaultRank(scen);
  fprintf(f, "{\n  \"scenario\": %s,\n  \"nranks\": %d,\n  \"steps\": %d,\n",
          JsonString(o.scenario.c_str()).c_str(), o.nranks, o.steps);
  fprintf(f, "  \"fault_rank\": %d,\n  \"fault_step\": %d,\n  \"delay_ms\": %d,\n",
          faulty ? ResolveFaultRank(o, scen) : -1,
          faulty && scen.uses_fault_step ? ResolveFaultStep(o) : -1, ResolveDelayMs(o, scen));
  fprintf(f, "  \"timeout_sec\": %g,\n  \"max_bytes\": %zu,\n  \"nonblocking\": %s,\n",
          o.timeout_sec, o.max_bytes, o.nonblocking ? "true" : "false");
  fprintf(f, "  \"summary\": %s,\n  \"expected\": %s,\n", JsonString(scen.summary).c_str(),
          JsonString(scen.expected).c_str());
  // The environment that shapes the run and its traces.
  static const char* const kEnv[] = {"NCCL_NVLS_ENABLE",     "NCCL_P2P_DISABLE",
                                     "NCCL_SHM_DISABLE",     "NCCL_PROFILER_PLUGIN",
                                     "NCCLWATCH_DIR",        "NCCLWATCH_EVENTS",
                                     "NCCLWATCH_STUCK_SEC",  "NCCLWATCH_HEARTBEAT_MS",
                                     "NCCLWATCH_FLUSH_MS"};
  fprintf(f, "  \"env\": {");
  bool first = true;
  for (const char* name : kEnv) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    fprintf(f, "%s\n    %s: %s", first ? "" : ",", JsonString(name).c_str(), JsonString(v).c_str());
    first = false;
  }
  fprintf(f, "%s},\n", first ? "" : "\n  ");
  fprintf(f, "  \"nccl_version\": %d,\n  \"wall_sec\": %.3f,\n  \"status\": %d,\n  \"ranks\": [\n",
          nccl_version, wall_sec, parent_status);
  for (size_t r = 0; r < kids.size(); ++r) {
    const ChildState& c = kids[r];
    int code = !c.running && WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    int sig = !c.running && WIFSIGNALED(c.status) ? WTERMSIG(c.status) : 0;
    fprintf(f, "    {\"rank\": %zu, \"pid\": %d, \"exit_code\": %d, \"signal\": %d, "
               "\"killed_by_parent\": %s, \"was_stopped\": %s}%s\n",
            r, int(c.pid), code, sig, c.killed_by_parent ? "true" : "false",
            c.was_stopped ? "true" : "false", r + 1 < kids.size() ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  fclose(f);
  Log("wrote %s", path.c_str());
}

int ParentMain(int argc, char** argv) {
  Options o;
  int pr = ParseArgs(argc, argv, &o);
  if (pr == -1) return kExitOk;
  if (pr != kExitOk) return pr;
  const Scenario* scen = FindScenario(o.scenario);
  if (scen == nullptr) {
    fprintf(stderr, "nccl_scenarios: unknown scenario '%s'; known:\n", o.scenario.c_str());
    ListScenarios();
    return kExitUsage;
  }
  if (o.nranks < scen->min_ranks) {
    fprintf(stderr, "nccl_scenarios: scenario '%s' needs --nranks >= %d\n", scen->name,
            scen->min_ranks);
    return kExitUsage;
  }
  int fault_rank = ResolveFaultRank(o, *scen);
  if (HasFaultRank(*scen)) {
    if (fault_rank >= o.nranks) {
      fprintf(stderr, "nccl_scenarios: --fault-rank %d is not below --nranks %d\n", fault_rank,
              o.nranks);
      return kExitUsage;
    }
    if (scen->uses_fault_step && ResolveFaultStep(o) >= o.steps) {
      fprintf(stderr, "nccl_scenarios: --fault-step %d is not below --steps %d\n",
              ResolveFaultStep(o), o.steps);
      return kExitUsage;
    }
    if (scen->check != nullptr) {
      if (const char* err = scen->check(o, fault_rank)) {
        fprintf(stderr, "nccl_scenarios: %s\n", err);
        return kExitUsage;
      }
    }
  }

  ForceNvlsOff();

  if (!o.out_dir.empty()) {
    if (!MakeDirs(o.out_dir)) {
      fprintf(stderr, "nccl_scenarios: cannot create --out-dir %s: %s\n", o.out_dir.c_str(),
              strerror(errno));
      return kExitUsage;
    }
    if (getenv("NCCLWATCH_DIR") == nullptr) setenv("NCCLWATCH_DIR", o.out_dir.c_str(), 1);
  }

  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  const char* plugin = getenv("NCCL_PROFILER_PLUGIN");
  const char* wdir = getenv("NCCLWATCH_DIR");
  Log("scenario %s: %s", scen->name, scen->summary);
  Log("expected: %s", scen->expected);
  Log("nranks %d, steps %d, timeout %g s, sizes %s..%s, NCCL %d (headers %d.%d.%d), "
      "NCCL_PROFILER_PLUGIN=%s, NCCLWATCH_DIR=%s",
      o.nranks, o.steps, o.timeout_sec, HumanBytes(kMinBytes).c_str(),
      HumanBytes(o.max_bytes).c_str(), version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
      plugin ? plugin : "(unset)", wdir ? wdir : "(unset)");
  if (scen->uses_fault_step)
    Log("fault rank %d, fault step %d, delay %d ms", fault_rank, ResolveFaultStep(o),
        ResolveDelayMs(o, *scen));
  else if (HasFaultRank(*scen))
    Log("fault rank %d, delay %d ms", fault_rank, ResolveDelayMs(o, *scen));
  if (std::string(scen->name) == "net-stall" &&
      (getenv("NCCL_P2P_DISABLE") == nullptr || getenv("NCCL_SHM_DISABLE") == nullptr))
    Log("note: net-stall without NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 stalls only the host: "
        "NVLink/shared-memory transfers go on without the stopped process");

  // No CUDA in the parent: the id is a plain struct copied into each child by fork.
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));

  int64_t t0 = NowNs();
  std::vector<ChildState> kids(o.nranks);
  const pid_t parent_pid = getpid();
  fflush(nullptr);
  for (int r = 0; r < o.nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      Log("fork: %s", strerror(errno));
      KillForked(kids, r);
      return kExitError;
    }
    if (pid == 0) {
      // A host-stuck or stopped net-stall rank dies with the parent too.
      if (!EnterRank(r, parent_pid)) _exit(kExitError);
      InstallCrashHandler(r);
      int code = RunRank(o, *scen, r, id);
      fflush(nullptr);
      exit(code);  // normal exit: static destructors (and the plugin's) run
    }
    kids[r].pid = pid;
  }

  // Reap. Once one child has exited (failed, or done while others are not),
  // the rest get T + kParentGraceSec seconds (their own watchdogs fire within
  // T of their step's start, then abort and exit; healthy ranks only have
  // their teardown left), then the parent SIGKILLs them, so it never hangs: a
  // rank idling in host code (host-stuck) has no deadline of its own. A rank
  // stopped by a signal (SIGSTOP: net-stall) cannot move on by itself; once
  // every rank still running is stopped, the stopped ones are killed at once.
  const double grace = o.timeout_sec + kParentGraceSec;
  int64_t kill_at = 0;
  int running = o.nranks;
  auto kill_rest = [&](const char* why) {
    for (ChildState& c : kids) {
      if (!c.running || c.killed_by_parent) continue;
      Log("killing pid %d (%s)", int(c.pid), why);
      c.killed_by_parent = true;
      kill(c.pid, SIGKILL);  // SIGKILL also ends a stopped process
    }
  };
  while (running > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid < 0 && errno != EINTR) {
      Log("waitpid: %s", strerror(errno));
      break;
    }
    if (pid > 0) {
      for (int r = 0; r < o.nranks; ++r) {
        ChildState& c = kids[r];
        if (c.pid != pid || !c.running) continue;
        if (WIFSTOPPED(st)) {
          c.stopped = c.was_stopped = true;
          Log("rank %d (pid %d) stopped by signal %d (%s) after %.1f s", r, int(pid),
              WSTOPSIG(st), strsignal(WSTOPSIG(st)), SecSince(t0));
          break;
        }
        if (WIFCONTINUED(st)) {
          c.stopped = false;
          Log("rank %d (pid %d) continued after %.1f s", r, int(pid), SecSince(t0));
          break;
        }
        c.running = false;
        c.stopped = false;
        c.status = st;
        --running;
        Log("rank %d (pid %d) %s after %.1f s", r, int(pid), DescribeStatus(c).c_str(),
            SecSince(t0));
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (kill_at == 0 && running > 0) {
          kill_at = NowNs() + int64_t(grace * 1e9);
          if (!ok)
            Log("a rank failed; the others get %.0f s (T + %d s) to exit before the parent "
                "kills them",
                grace, kParentGraceSec);
        }
        break;
      }
      continue;
    }
    if (running > 0 && running < o.nranks) {
      bool all_stopped = true;
      for (const ChildState& c : kids)
        if (c.running && !c.stopped) all_stopped = false;
      if (all_stopped) kill_rest("stopped by a signal, and every other rank has exited");
      else if (kill_at != 0 && NowNs() > kill_at) kill_rest("still running after the grace period");
    }
    usleep(50 * 1000);
  }

  bool all_ok = true;
  Log("summary for scenario %s (%.1f s):", scen->name, SecSince(t0));
  for (int r = 0; r < o.nranks; ++r) {
    Log("  rank %d (pid %d): %s", r, int(kids[r].pid), DescribeStatus(kids[r]).c_str());
    if (kids[r].running || !WIFEXITED(kids[r].status) || WEXITSTATUS(kids[r].status) != 0)
      all_ok = false;
  }
  int status = all_ok ? kExitOk : kExitError;
  Log("expected: %s", scen->expected);
  Log("exit status %d", status);
  if (!o.out_dir.empty()) WriteSummary(o, *scen, version, kids, status, SecSince(t0));
  return status;
}

}  // namespace
}  // namespace ncclwatch::scenarios

int main(int argc, char** argv) { return ncclwatch::scenarios::ParentMain(argc, argv); }
