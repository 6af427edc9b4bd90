// The Profiler's life: the one process-wide instance (Acquire/Release, kept
// consistent across fork), its buffers, communicators and logging, and the
// Writer it owns, which sees it through a CoreView (ProfilerView below). The
// event path is core.cc and its neighbours (core.h); this is the one file
// that includes both core.h and writer.h.

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>

#include "plugin/core/core.h"
#include "plugin/core/core_view.h"
#include "plugin/writer/writer.h"

namespace ncclwatch::plugin {
namespace {

std::mutex g_mu;
Profiler* g_prof = nullptr;  // guarded by g_mu
std::atomic<uint64_t> g_generation{0};
// The last Profilers closed (Release), so that a thread still posting on one
// of their communicators is told apart from a foreign context.
constexpr int kRetiredKept = 4;
std::atomic<Profiler*> g_retired[kRetiredKept];
int g_retired_next = 0;  // guarded by g_mu

// fork(): the child has none of the parent's threads, so no writer; its copy
// of the Profiler must never be flushed, finalized or freed there (that would
// wait on, or join, a thread that does not exist, and the file is the
// parent's). The child abandons it: events on inherited communicators are
// ignored, and a communicator the child creates gets a new Profiler and a file
// of its own. g_mu is held across fork so the child's copy is consistent.
void AtForkPrepare() { g_mu.lock(); }
void AtForkParent() { g_mu.unlock(); }
void AtForkChild() {
  if (g_prof != nullptr) {
    g_prof->Abandon();
    g_prof = nullptr;
  }
  profiler_internal::g_current.store(nullptr, std::memory_order_release);
  g_mu.unlock();
}

// A communicator's name, as NCCL gave it, up to kMaxNameBytes: a longer one
// (a 9 MB name made a record the file could not hold) is cut, with a marker.
constexpr size_t kMaxNameBytes = 256;
std::string BoundedName(const char* name) {
  if (name == nullptr) return "";
  const size_t n = strnlen(name, kMaxNameBytes + 1);
  if (n <= kMaxNameBytes) return std::string(name, n);
  return std::string(name, kMaxNameBytes) + "...(truncated)";
}

bool NcclDebugShowsInfo(const char* v) {
  return v != nullptr && (strcasecmp(v, "INFO") == 0 || strcasecmp(v, "TRACE") == 0);
}

// The writer's view of a Profiler: each call is the Profiler's own. Made by
// Init and owned by the Writer; the Profiler outlives both.
class ProfilerView final : public CoreView {
 public:
  explicit ProfilerView(Profiler* p) : p_(p) {}

  const Config& config() const override { return p_->config(); }
  int api_version() const override { return p_->api_version(); }
  const ClockProbe& clock_probe() const override { return p_->clock_probe(); }
  bool events() const override { return p_->events(); }
  const CudaDriver& cuda() const override { return p_->cuda(); }
  const std::string& completions() const override { return p_->completions(); }
  uint32_t thread_count() const override { return p_->thread_count(); }
  ThreadBuf* thread_buf(uint32_t i) override { return p_->thread_buf(i); }
  void BufferFreed() override { p_->BufferFreed(); }
  SharedLane& lane() override { return p_->lane(); }
  const Slot* slots_begin() const override { return p_->slots_begin(); }
  const Slot* slots_end() const override { return p_->slots_end(); }
  uint64_t no_thread_slot() const override { return p_->no_thread_slot(); }
  std::vector<Context*> ContextsSnapshot() override { return p_->ContextsSnapshot(); }
  void RecycleContext(Context* ctx) override { p_->RecycleContext(ctx); }
  int* nccl_mask_address() const override { return p_->nccl_mask_address(); }
  void SetEventIntervalTicks(uint64_t ticks) override { p_->SetEventIntervalTicks(ticks); }
  // Formatted here, then passed on whole: Profiler::Log cuts at the same
  // 1,023 bytes.
  void VLog(nccl::LogLevel level, const char* fmt, va_list ap) override {
    char buf[1024];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    p_->Log(level, "%s", buf);
  }

 private:
  Profiler* const p_;
};

}  // namespace

Profiler* Profiler::Acquire(const ProfilerOptions& opts, std::string* error) {
  // Registered once per load of the library; glibc drops the handlers when
  // the library is unloaded.
  static const bool atfork_registered = pthread_atfork(&AtForkPrepare, &AtForkParent, &AtForkChild) == 0;
  (void)atfork_registered;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_prof != nullptr) {
    ++g_prof->refs_;
    return g_prof;
  }
  std::unique_ptr<Profiler> p(new Profiler(opts));
  if (!p->Init(error)) return nullptr;
  p->refs_ = 1;
  g_prof = p.release();
  profiler_internal::g_current.store(g_prof, std::memory_order_release);
  return g_prof;
}

void Profiler::Release(Profiler* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (p == nullptr || p != g_prof) return;  // abandoned in a forked child: kept, never freed
  if (--p->refs_ > 0) return;
  g_prof = nullptr;
  profiler_internal::g_current.store(nullptr, std::memory_order_release);
  // Closed, not freed: other threads may still be inside Start or Stop with
  // this Profiler's contexts and slots (NCCL finalizes one communicator while
  // another thread posts on it), so its memory stays valid for the life of
  // the process. Only the writer ends: the file is complete and closed.
  p->writer_->StopAndClose();
  p->closed_.store(true, std::memory_order_release);
  static auto* retired = new std::vector<Profiler*>;  // reachable: not a leak to LSan
  retired->push_back(p);
  g_retired[g_retired_next].store(p, std::memory_order_release);
  g_retired_next = (g_retired_next + 1) % kRetiredKept;
}

namespace profiler_internal {
std::atomic<Profiler*> g_current{nullptr};
}  // namespace profiler_internal

Context* Profiler::KnownRetiredContext(const void* p) {
  for (auto& r : g_retired) {
    Profiler* old = r.load(std::memory_order_acquire);
    if (old != nullptr && old->OwnsContext(p)) return static_cast<Context*>(const_cast<void*>(p));
  }
  return nullptr;
}

Profiler::Profiler(const ProfilerOptions& opts)
    : wanted_kinds_(opts.config.raw_kinds | (1u << kEvColl) | (1u << kEvP2p) | (1u << kEvKernelCh) |
                    (1u << kEvProxyOp) | (1u << kEvProxyStep)),
      kernelch_fast_(!((opts.config.raw_kinds >> kEvKernelCh) & 1)),
      start_events_(opts.config.start_events),
      any_raw_(opts.config.raw_kinds != 0),
      generation_(g_generation.fetch_add(1) + 1),
      config_(opts.config),
      api_version_(opts.api_version),
      logger_(opts.logger),
      file_name_override_(opts.file_name_override),
      clock_probe_(opts.clock_probe),
      pid_(getpid()),
      info_to_stderr_(NcclDebugShowsInfo(getenv("NCCL_DEBUG"))),
      context_grace_ns_(opts.context_grace_ns) {}

void Profiler::ChooseCompletions() {
  // NCCL 2.31 reports phases only under kernel channels, and adds KernelCh
  // to a mask with KernelPhase after init (ncclProfilerEnforceMaskDeps):
  // ask for what it will run, so the mask read back is the one set (no
  // MaskChange, no warning about RAS), and take completions from those
  // channels rather than pay for CUDA events on top of them.
  const bool phases = api_version_ >= 7 && (config_.nccl_mask & nccl::kKernelPhase) != 0;
  if (phases) config_.nccl_mask |= nccl::kKernelCh;
  // From NCCL 2.31 kernel channels also turn on NCCL's per-phase device
  // timestamps and a system fence in every kernel: they cost the job
  // itself, whatever the plugin does, so the default never asks for them
  // there, and a user who does is told the price at init.
  const std::string cost =
      api_version_ >= 7 ? "; NCCL 2.31 and later charge kernel channels to every kernel (10.5% at a 1 MiB "
                          "all-reduce on 8x A100 with NCCL 2.31.2, NVIDIA/nccl#2355)"
                        : "";
  if (config_.completions == Completions::kChannels) {
    if (!cost.empty()) completions_ = "channels (NCCLWATCH_COMPLETIONS=channels" + cost + ")";
    return;
  }
  // The default (auto) takes CUDA events wherever they can be had: NCCL's
  // kernel-channel instrumentation costs its proxy thread whatever the
  // plugin does (2.8x on a pipelined 1 MiB all-reduce on 2x H200), events
  // cost the launching thread under a microsecond (BENCHMARKS.md).
  const bool asked = config_.completions == Completions::kEvents;
  const std::string name = asked ? "NCCLWATCH_COMPLETIONS=events" : "CUDA-event completions";
  std::string why;
  if (api_version_ < 5) {
    why = name + " need profiler API v5 (NCCL 2.28 or later), this NCCL uses v" + std::to_string(api_version_);
  } else if (phases) {
    why = name + " are not used with kernelphase in NCCLWATCH_EVENTS: NCCL runs kernel channels for the phases";
  } else if (!ResolveCudaDriver(&cuda_, &why)) {
    why = name + ": " + why;
  }
  if (!why.empty() && api_version_ >= 7 && !phases && kernelch_fast_) {
    // No CUDA events here, and channels would cost the job: no completions.
    config_.nccl_mask &= ~static_cast<uint64_t>(nccl::kKernelCh);
    completions_ = "none (" + why + cost + "; NCCLWATCH_COMPLETIONS=channels asks for them)";
    if (asked) config_.warnings.push_back(why + "; no completions are recorded");
    return;
  }
  if (!why.empty()) {
    completions_ = "channels (" + why + (phases || !kernelch_fast_ ? cost : "") + ")";
    // Asked for by name, the fallback is news; by default it is expected
    // (NCCL 2.23 to 2.27, a process that never loaded libcuda): the init
    // line and the file header say which was used.
    if (asked) config_.warnings.push_back(why + "; completions come from kernel channels");
    return;
  }
  events_ = true;
  completions_ = "events";
  sampled_ = config_.event_interval_us > 0;
  streams_.reset(new StreamTable(&cuda_));
  StopCudaCallsAtExit();
  // NCCL's kernel-channel instrumentation is what this replaces: it costs
  // the same whatever the plugin does with it. Kept only when asked for raw.
  config_.nccl_mask |= nccl::kKernelLaunch;
  if (kernelch_fast_) config_.nccl_mask &= ~static_cast<uint64_t>(nccl::kKernelCh);
  else if (!cost.empty()) completions_ = "events (kernelch in NCCLWATCH_EVENTS" + cost + ")";
  wanted_kinds_ |= 1u << kEvKernelLaunch;
  launch_fast_ = !((config_.raw_kinds >> kEvKernelLaunch) & 1);
}

bool Profiler::Init(std::string* error) {
  ChooseCompletions();
  uint64_t budget = config_.buffer_mb << 20;
  uint64_t n = budget / kBytesPerThread;
  if (n < 4) n = 4;
  if (n > 1024) n = 1024;
  nthreads_ = static_cast<uint32_t>(n);
  storage_bytes_ = nthreads_ * kBytesPerThread;
  void* mem = mmap(nullptr, storage_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    *error = "cannot reserve " + std::to_string(storage_bytes_ >> 20) + " MiB for buffers: " + strerror(errno);
    storage_ = nullptr;
    return false;
  }
  storage_ = mem;
  // A large allocation is mapped on demand (malloc's mmap threshold), and
  // stays a heap block, so that leak checkers see the contexts' strings.
  ctx_block_ = static_cast<Context*>(
      ::operator new(kMaxContexts * sizeof(Context), std::align_val_t(alignof(Context)), std::nothrow));
  if (ctx_block_ == nullptr) {
    *error = "cannot reserve memory for " + std::to_string(kMaxContexts) + " communicators";
    return false;
  }
  auto* slots = static_cast<Slot*>(mem);
  constexpr size_t kPerThread = kSlotsPerThread + kSpareSlots;
  auto* recs = reinterpret_cast<Rec*>(slots + size_t{nthreads_} * kPerThread);
  slots_begin_ = slots;
  slots_end_ = slots + size_t{nthreads_} * kPerThread;
  threads_.reset(new ThreadBuf[nthreads_]);
  for (uint32_t i = 0; i < nthreads_; ++i) {
    ThreadBuf& t = threads_[i];
    t.index = i;
    t.slots = slots + size_t{i} * kPerThread;
    t.nslots = kSlotsPerThread;
    t.nspare = kSpareSlots;
    t.launch = reinterpret_cast<Slot*>(recs + size_t{nthreads_} * kRingRecords) + i;
    t.ring.Init(recs + size_t{i} * kRingRecords, kRingRecords);
  }
  key_ok_ = pthread_key_create(&key_, &Profiler::ThreadExit) == 0;
  writer_.reset(new Writer(std::unique_ptr<CoreView>(new ProfilerView(this)), file_name_override_));
  if (!writer_->Open(error)) return false;
  writer_->Start();
  return true;
}

Profiler::~Profiler() {
  if (writer_) writer_->StopAndClose();
  for (Context* c : contexts_) c->~Context();
  ::operator delete(ctx_block_, std::align_val_t(alignof(Context)));
  if (key_ok_) pthread_key_delete(key_);
  if (storage_ != nullptr) munmap(storage_, storage_bytes_);
}

void Profiler::Log(nccl::LogLevel level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (logger_ != nullptr) {
    logger_(level, nccl::kLogSubsysInit | nccl::kLogSubsysProfile, "ncclwatch", 0, "ncclwatch: %s", buf);
  } else if (level == nccl::kLogWarn || info_to_stderr_) {
    // No logger (API v1..v3): warnings always; info lines when NCCL's own
    // would be printed (NCCL_DEBUG=INFO or TRACE).
    fprintf(stderr, "%s ncclwatch: %s\n", level == nccl::kLogWarn ? "NCCL WARN" : "NCCL INFO", buf);
  }
}

std::vector<Context*> Profiler::ContextsSnapshot() {
  std::lock_guard<std::mutex> lock(ctx_mu_);
  std::vector<Context*> out;
  out.reserve(contexts_.size());
  for (Context* c : contexts_) out.push_back(c);
  return out;
}

Context* Profiler::NewContext(uint64_t comm_hash, const char* name, int nnodes, int nranks, int rank) {
  const uint64_t now = NowNs();
  Context* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(ctx_mu_);
    // A finalized communicator's context (and its file-local id) is given
    // again once its CommFinalize is written and kContextGraceNs have
    // passed: a thread still posting on it by then would be a host bug, and
    // memory stays bounded by the communicators alive or recently finalized.
    // Past 65,535 ids, the oldest finalized one is taken at once.
    const bool ids_left = next_comm_id_ <= 65535;
    if (!recycled_.empty() && (recycled_.front().first + context_grace_ns_ <= now || !ids_left)) {
      c = recycled_.front().second;
      recycled_.pop_front();
    } else if (ids_left) {
      c = new (&ctx_block_[contexts_.size()]) Context();
      contexts_.push_back(c);
      ctx_used_.store(contexts_.size(), std::memory_order_release);
      c->comm = static_cast<uint16_t>(next_comm_id_++);
    } else {
      return nullptr;
    }
  }
  // Nothing reads a context between its CommFinalize and here but the
  // writer's scans, which skip it until `finalized` is cleared below.
  c->prof = this;
  c->comm_hash = comm_hash;
  c->name = BoundedName(name);
  c->nnodes = nnodes;
  c->nranks = nranks;
  c->rank = rank;
  c->nccl_impossible = api_version_ >= 4 && ImpossibleComm(nranks, rank);
  c->init_ns = now;
  c->event_comm_hash.store(0, std::memory_order_relaxed);
  c->send_seq.reset();
  c->recv_seq.reset();
  // Per-peer order only for a size NCCL could have given: a communicator of
  // 2^31-1 "ranks" gets none (its point-to-point operations go unnumbered,
  // as under API v1 to v3).
  if (!c->nccl_impossible && nranks > 0 && nranks <= kMaxCommRanks) {
    c->send_seq.reset(new std::atomic<uint32_t>[nranks]);
    c->recv_seq.reset(new std::atomic<uint32_t>[nranks]);
    for (int i = 0; i < nranks; ++i) {
      c->send_seq[i].store(0, std::memory_order_relaxed);
      c->recv_seq[i].store(0, std::memory_order_relaxed);
    }
  }
  if (c->nccl_impossible)
    Log(nccl::kLogWarn,
        "NCCL gave communicator '%s' nranks %d, rank %d, which no communicator can have; recorded as NCCL gave them",
        c->name.c_str(), nranks, rank);
  c->finalize_written.store(false, std::memory_order_relaxed);
  c->finalized.store(false, std::memory_order_release);
  Context* raw = c;
  writer_->NotifyCommInit(raw);
  return raw;
}

bool Profiler::FinalizeContext(Context* ctx) {
  if (ctx == nullptr) return false;
  // Once per context: a second finalize would release the Profiler twice.
  if (ctx->finalized.exchange(true, std::memory_order_acq_rel)) {
    WarnOnce(&warned_refinalize_, "a communicator was finalized twice; the second finalize is ignored");
    return false;
  }
  if (abandoned_.load(std::memory_order_relaxed)) return true;
  // One writer cycle drains the rings before it encodes the CommFinalize,
  // so everything this communicator recorded precedes it, and the flush puts
  // it on disk before NCCL goes on.
  writer_->NotifyCommFinalize(ctx, NowNs());
  writer_->FlushNow();
  return true;
}

void Profiler::WarnOnce(std::atomic<bool>* flag, const char* what) {
  if (!flag->exchange(true, std::memory_order_relaxed)) Log(nccl::kLogWarn, "%s", what);
}

void Profiler::RefuseFinalized() {
  WarnOnce(&warned_after_finalize_,
           "events on a finalized communicator are ignored (NCCL called the profiler after finalizing it)");
}

void Profiler::RecycleContext(Context* ctx) {
  std::lock_guard<std::mutex> lock(ctx_mu_);
  recycled_.emplace_back(NowNs(), ctx);
}

void Profiler::ForceFlush() {
  if (!abandoned_.load(std::memory_order_relaxed)) writer_->FlushNow();
}

void Profiler::Abandon() { abandoned_.store(true, std::memory_order_relaxed); }

const std::string& Profiler::writer_path() const { return writer_->path(); }
const std::string& Profiler::clock_source() const { return writer_->clock_source(); }
const ClockFacts& Profiler::clock_facts() const { return writer_->clock_facts(); }
void Profiler::PauseDrainForTesting(bool paused) { writer_->PauseDrainForTesting(paused); }


}  // namespace ncclwatch::plugin
