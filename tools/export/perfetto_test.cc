// The Perfetto output read back by an independent reader: libprotobuf over
// proto/perfetto_subset.proto (Perfetto's trace_processor is not installable
// here), checked against the model: every operation a slice on its rank's
// track with its begin and end times, flows in time order.

#include "tools/export/perfetto.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "proto/perfetto_subset.pb.h"
#include "tools/cli.h"
#include "tools/export/export_test_job.h"
#include "tools/export/timeline.h"
#include "tools/model/liveness.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

namespace pb = ::ncclwatch::perfetto_subset;

struct ReadSlice {
  uint64_t track = 0;
  int64_t begin = 0, end = -1;
  std::string name, category;
  std::map<std::string, pb::DebugAnnotation> args;
  std::vector<uint64_t> flows, terminating;
  int64_t parent = -1;  // the slice of its track it began within (ReadTrace::slices)
};

struct ReadTrack {
  uint64_t parent = 0;
  std::string name;
  int32_t pid = 0;  // process tracks
};

// What a viewer would make of the packets, in file order, as Perfetto
// reads them: interned names defined before use on sequence 1, each track
// described before its events, each begin closed by an end on its track.
struct ReadTrace {
  std::map<uint64_t, ReadTrack> tracks;
  std::vector<ReadSlice> slices;
  std::vector<ReadSlice> instants;
  size_t packets = 0;
};

ReadTrace Read(const std::string& bytes) {
  ReadTrace r;
  pb::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(bytes)) << "not a Trace message";
  std::map<uint64_t, std::string> names, categories, arg_names;
  std::map<uint64_t, std::vector<size_t>> open;  // per track: the slices begun, not ended
  r.packets = static_cast<size_t>(trace.packet_size());
  for (int i = 0; i < trace.packet_size(); ++i) {
    const pb::TracePacket& p = trace.packet(i);
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    if (i == 0) {
      EXPECT_EQ(p.sequence_flags(), pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    }
    for (const auto& n : p.interned_data().event_names()) EXPECT_TRUE(names.emplace(n.iid(), n.name()).second);
    for (const auto& n : p.interned_data().event_categories())
      EXPECT_TRUE(categories.emplace(n.iid(), n.name()).second);
    for (const auto& n : p.interned_data().debug_annotation_names())
      EXPECT_TRUE(arg_names.emplace(n.iid(), n.name()).second);
    EXPECT_NE(p.has_track_descriptor(), p.has_track_event()) << "packet " << i;
    if (p.has_track_descriptor()) {
      const pb::TrackDescriptor& d = p.track_descriptor();
      EXPECT_TRUE(d.has_uuid());
      ReadTrack t;
      t.parent = d.parent_uuid();
      t.name = d.has_process() ? d.process().process_name() : d.name();
      t.pid = d.process().pid();
      if (t.parent != 0) {
        EXPECT_EQ(r.tracks.count(t.parent), 1u) << "parent described first";
      }
      EXPECT_TRUE(r.tracks.emplace(d.uuid(), t).second) << "uuid " << d.uuid() << " twice";
      continue;
    }
    const pb::TrackEvent& e = p.track_event();
    EXPECT_TRUE(p.has_timestamp());
    EXPECT_EQ(p.sequence_flags(), pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    EXPECT_EQ(r.tracks.count(e.track_uuid()), 1u) << "event on an undescribed track";
    const int64_t ts = static_cast<int64_t>(p.timestamp());
    if (e.type() == pb::TrackEvent::TYPE_SLICE_END) {
      auto& stack = open[e.track_uuid()];
      EXPECT_FALSE(stack.empty()) << "an end without a begin";
      if (stack.empty()) continue;
      r.slices[stack.back()].end = ts;
      EXPECT_GE(ts, r.slices[stack.back()].begin);
      stack.pop_back();
      continue;
    }
    ReadSlice s;
    s.track = e.track_uuid();
    s.begin = ts;
    EXPECT_EQ(names.count(e.name_iid()), 1u) << "name iid " << e.name_iid() << " used before it is defined";
    s.name = names[e.name_iid()];
    EXPECT_EQ(e.category_iids_size(), 1);
    if (e.category_iids_size() > 0) s.category = categories[e.category_iids(0)];
    for (const auto& a : e.debug_annotations()) {
      EXPECT_EQ(arg_names.count(a.name_iid()), 1u);
      s.args[arg_names[a.name_iid()]] = a;
    }
    s.flows.assign(e.flow_ids().begin(), e.flow_ids().end());
    s.terminating.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
    if (e.type() == pb::TrackEvent::TYPE_INSTANT) {
      r.instants.push_back(s);
    } else {
      EXPECT_EQ(e.type(), pb::TrackEvent::TYPE_SLICE_BEGIN);
      // Slices of one track never overlap: the one before has ended, or
      // this one is nested in it (checked at the end).
      if (!open[s.track].empty()) s.parent = static_cast<int64_t>(open[s.track].back());
      open[s.track].push_back(r.slices.size());
      r.slices.push_back(s);
    }
  }
  for (auto& [track, stack] : open) EXPECT_TRUE(stack.empty()) << "a slice never ends on " << r.tracks[track].name;
  for (const ReadSlice& s : r.slices) {
    if (s.parent < 0) continue;
    const ReadSlice& p = r.slices[static_cast<size_t>(s.parent)];
    EXPECT_TRUE(p.begin <= s.begin && s.end <= p.end) << "slices overlap on track " << r.tracks[s.track].name;
  }
  return r;
}

std::string Bytes(const Model& m, const ExportOptions& opts = {}) {
  std::ostringstream out;
  WritePerfettoTrace(m, opts, out);
  return out.str();
}

// Every flow, in time order: each step from an earlier slice to a later one,
// the terminating id on the latest, ids only on slices of one match.
void ExpectFlowsInTimeOrder(const Model& m, const ReadTrace& r, size_t* flows_seen) {
  std::map<uint64_t, std::vector<const ReadSlice*>> by_id;
  std::map<uint64_t, const ReadSlice*> last;
  for (const ReadSlice& s : r.slices) {
    for (uint64_t id : s.flows) by_id[id].push_back(&s);
    for (uint64_t id : s.terminating) {
      EXPECT_EQ(last.count(id), 0u) << "flow " << id << " ends twice";
      last[id] = &s;
      by_id[id].push_back(&s);
    }
  }
  for (auto& [id, steps] : by_id) {
    ASSERT_EQ(last.count(id), 1u) << "flow " << id << " never ends";
    ASSERT_GE(steps.size(), 2u);
    ASSERT_GE(id, 1u);
    ASSERT_LE(id, m.matches.size());
    for (const ReadSlice* s : steps) {
      EXPECT_LE(s->begin, last[id]->begin) << "flow " << id << " steps back in time";
      EXPECT_EQ(s->category == "coll" || s->category == "p2p", true);
    }
  }
  *flows_seen = by_id.size();
}

TEST(PerfettoTest, SlicesTracksAndTimesOfAHandBuiltJob) {
  Job j("world");
  j.Add(0, "AllReduce", 0, 1'000'000, 1'500'000, 1'100'000, 300'000);
  j.Add(1, "AllReduce", 0, 1'200'000, 1'500'000, 1'250'000, 240'000);
  j.Add(0, "AllReduce", 1, 2'000'000, -1);  // never completes: in flight to the end
  j.Link({0, 1});
  const ReadTrace r = Read(Bytes(j.m));
  std::map<std::string, uint64_t> process_uuid;
  for (auto& [uuid, t] : r.tracks)
    if (t.parent == 0) process_uuid[t.name] = uuid;
  ASSERT_EQ(process_uuid.size(), 2u);
  const uint64_t p0 = process_uuid["rank 0 (node0:4000)"], p1 = process_uuid["rank 1 (node1:4001)"];
  EXPECT_EQ(r.tracks.at(p0).pid, 1);  // procs index + 1
  EXPECT_EQ(r.tracks.at(p1).pid, 2);
  std::map<std::pair<uint64_t, std::string>, std::vector<const ReadSlice*>> on;  // (process, track name)
  for (const ReadSlice& s : r.slices) on[{r.tracks.at(s.track).parent, r.tracks.at(s.track).name}].push_back(&s);
  const auto w0 = std::make_pair(p0, std::string("world")), g0 = std::make_pair(p0, std::string("world (GPU)"));
  const auto w1 = std::make_pair(p1, std::string("world"));
  ASSERT_EQ(on[w0].size(), 2u);
  ASSERT_EQ(on[g0].size(), 1u);
  ASSERT_EQ(on[w1].size(), 1u);
  const ReadSlice& a = *on[w0][0];
  EXPECT_EQ(a.name, "AllReduce");
  EXPECT_EQ(a.category, "coll");
  EXPECT_EQ(a.begin, 1'000'000);  // ns since the origin
  EXPECT_EQ(a.end, 1'500'000);
  EXPECT_EQ(a.args.at("seq").int_value(), 0);
  EXPECT_EQ(a.args.at("comm").string_value(), "world");
  EXPECT_EQ(a.args.at("datatype").string_value(), "ncclFloat32");
  EXPECT_DOUBLE_EQ(a.args.at("enqueue_us").double_value(), 3.0);
  EXPECT_EQ(a.flows, std::vector<uint64_t>{1});  // rank 0 arrived first: the source
  const ReadSlice& b = *on[w1][0];
  EXPECT_EQ(b.begin, 1'200'000);
  EXPECT_EQ(b.terminating, std::vector<uint64_t>{1});
  const ReadSlice& g = *on[g0][0];
  EXPECT_EQ(g.category, "gpu");
  EXPECT_EQ(g.begin, 1'100'000);
  EXPECT_EQ(g.end, 1'400'000);
  EXPECT_TRUE(g.flows.empty() && g.terminating.empty());
  const ReadSlice& c = *on[w0][1];
  EXPECT_EQ(c.name, "AllReduce (in flight)");  // the files end 8 ms after it: no hang yet
  EXPECT_EQ(c.begin, 2'000'000);
  EXPECT_EQ(c.end, 10'000'000);  // the end of the job
}

// The old exporter ran flows from the lowest rank to the highest: here
// rank 1 arrives first, so the flow must start on it.
TEST(PerfettoTest, AFlowStartsOnTheEarliestArrivalNotTheLowestRank) {
  Job j("world", 4);
  const int64_t start[4] = {3'000'000, 1'000'000, 4'000'000, 2'000'000};
  for (int r = 0; r < 4; ++r) j.Add(r, "AllReduce", 0, start[r], 5'000'000);
  j.Link({0, 1, 2, 3});
  const ReadTrace r = Read(Bytes(j.m));
  std::map<int64_t, const ReadSlice*> by_begin;
  for (const ReadSlice& s : r.slices) by_begin[s.begin] = &s;
  ASSERT_EQ(by_begin.size(), 4u);
  EXPECT_EQ(by_begin[1'000'000]->args.at("rank").int_value(), 1);
  EXPECT_EQ(by_begin[1'000'000]->flows, std::vector<uint64_t>{1});
  EXPECT_EQ(by_begin[2'000'000]->flows, std::vector<uint64_t>{1});
  EXPECT_EQ(by_begin[3'000'000]->flows, std::vector<uint64_t>{1});
  EXPECT_EQ(by_begin[4'000'000]->terminating, std::vector<uint64_t>{1});  // rank 2, the last to arrive
  size_t flows = 0;
  ExpectFlowsInTimeOrder(j.m, r, &flows);
  EXPECT_EQ(flows, 1u);
}

// Labels a viewer shows: the visible escapes of tools/text/safe_text.h.
TEST(PerfettoTest, HostileNamesStayValidUtf8) {
  Job j(std::string("bad\xFFname\n\"x\""));
  j.Add(0, "AllReduce", 0, 0, 100'000);
  const ReadTrace r = Read(Bytes(j.m));
  bool found = false;
  for (auto& [uuid, t] : r.tracks)
    if (t.parent != 0) {
      EXPECT_EQ(t.name, "bad\\xffname\\n\"x\"");
      found = true;
    }
  EXPECT_TRUE(found);
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string TempPath(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + name;
}

// Profiler API v7 with kernelphase captured, through the command: a track
// per kernel channel of the communicator, each op's channel a slice there
// and its phases nested in it, named for what they are; a phase NCCL did
// not report (no length) is no slice. Chrome JSON names the same.
TEST(PerfettoTest, KernelPhasesNestInTheirChannels) {
  using testing::kSec;
  using testing::kUs;
  testing::ProcSpec spec;
  spec.api = 7;
  spec.raw_capture = true;
  spec.event_mask = 0x8046;
  spec.launcher_rank = 0;
  testing::TraceBuilder b(spec);
  const int world = b.AddComm(0xabc, "world", 1, 0, kSec);
  const uint64_t g = 2 * kSec;
  testing::OpOpts o;
  o.gpu_start_ns = static_cast<int64_t>(g + 10 * kUs);
  o.gpu_stop_ns = static_cast<int64_t>(g + 90 * kUs);
  const uint64_t id = b.Coll(world, "AllReduce", 0, 1024, g, static_cast<int64_t>(g + 100 * kUs), o);
  b.KernelPhases(id, 0, g + 100 * kUs, {g + 10 * kUs, g + 40 * kUs, g + 60 * kUs, g + 90 * kUs});
  b.KernelPhases(id, 1, g + 100 * kUs, {g + 12 * kUs, g + 12 * kUs, g + 70 * kUs, g + 88 * kUs});
  b.Finalize(3 * kSec);
  const std::string dir = TempPath("phases");
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));

  const std::string path = TempPath("phases.perfetto");
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "export", "--format=perfetto", "-o", path, dir}, out, err), 0) << err.str();
  const ReadTrace r = Read(ReadFileBytes(path));
  std::map<std::string, std::vector<const ReadSlice*>> on;  // by track name
  for (const ReadSlice& s : r.slices) on[r.tracks.at(s.track).name].push_back(&s);
  ASSERT_EQ(on["world (GPU)"].size(), 1u);
  const ReadSlice& kernel = *on["world (GPU)"][0];
  const std::vector<std::pair<std::string, std::vector<std::string>>> want = {
      {"world (GPU ch 0)", {"AllReduce", "initial sync", "compute", "final sync"}},
      {"world (GPU ch 1)", {"AllReduce", "compute", "final sync"}}};
  const int64_t ch_end[2] = {80'000, 78'000};  // after the kernel's start
  for (size_t c = 0; c < want.size(); ++c) {
    const auto& slices = on[want[c].first];
    ASSERT_EQ(slices.size(), want[c].second.size()) << want[c].first;
    const ReadSlice& ch = *slices[0];
    EXPECT_EQ(ch.parent, -1);
    EXPECT_EQ(ch.category, "gpu");
    EXPECT_EQ(ch.args.at("channel").int_value(), static_cast<int64_t>(c));
    EXPECT_EQ(ch.args.at("seq").int_value(), 0);
    EXPECT_EQ(ch.begin - kernel.begin, c == 0 ? 0 : 2'000);
    EXPECT_EQ(ch.end - kernel.begin, ch_end[c]);
    for (size_t k = 1; k < slices.size(); ++k) {
      EXPECT_EQ(slices[k]->name, want[c].second[k]);
      EXPECT_EQ(slices[k]->category, "phase");
      EXPECT_GE(slices[k]->parent, 0) << slices[k]->name << " not nested";
      EXPECT_EQ(slices[k]->args.at("channel").int_value(), static_cast<int64_t>(c));
      EXPECT_EQ(slices[k]->args.at("op").string_value(), "AllReduce #0");
      EXPECT_EQ(slices[k]->begin, slices[k - 1]->end * (k > 1) + slices[k - 1]->begin * (k == 1));
    }
  }
  EXPECT_EQ(on["world (GPU ch 0)"][1]->end - kernel.begin, 30'000);

  std::ostringstream json, err2;
  ASSERT_EQ(RunCli({"ncclwatch", "export", dir}, json, err2), 0) << err2.str();
  EXPECT_NE(json.str().find("\"name\":\"world (GPU ch 1)\""), std::string::npos);
  EXPECT_NE(json.str().find("\"name\":\"initial sync\",\"cat\":\"phase\""), std::string::npos) << json.str();
}

// A real hang recorded on 4 GPUs, through the command: every operation of
// the model a slice on its rank's track, at its times, and every flow in
// time order.
TEST(PerfettoTest, RealJobMatchesTheModel) {
  const std::string path = TempPath("skip.perfetto");
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "export", "--format=perfetto", "-o", path, "testdata/gpu/skip"}, out, err), 0)
      << err.str();
  EXPECT_NE(err.str().find("open it in ui.perfetto.dev"), std::string::npos) << err.str();
  const ReadTrace r = Read(ReadFileBytes(path));

  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({"testdata/gpu/skip"}, LoadOptions(), &m, &error)) << error;
  const int64_t origin = JobSpan(m).first;
  const Liveness live = JudgeLiveness(m);
  // The model's ops by (process, comm name, function, seq, peer).
  using Key = std::tuple<int32_t, std::string, std::string, int64_t, int64_t>;
  std::map<Key, uint32_t> op_of;
  size_t cpu_ops = 0;
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& o = m.ops[oi];
    if (o.start_ns == kNoTime) continue;
    ++cpu_ops;
    const Key k{static_cast<int32_t>(o.proc) + 1, ExportCommName(m.comms[o.comm]), m.Str(o.func),
                static_cast<int64_t>(o.seq), o.kind == OpKind::kP2p ? o.peer_or_root : -1};
    EXPECT_TRUE(op_of.emplace(k, oi).second) << "ambiguous key";
  }
  size_t cpu = 0, gpu = 0;
  std::set<uint32_t> seen;
  for (const ReadSlice& s : r.slices) {
    const ReadTrack& track = r.tracks.at(s.track);
    const ReadTrack& process = r.tracks.at(track.parent);
    std::string func = s.name.substr(0, s.name.find(' '));
    const Key k{process.pid, s.args.at("comm").string_value(), func, s.args.at("seq").int_value(),
                s.args.count("peer") ? s.args.at("peer").int_value() : -1};
    ASSERT_EQ(op_of.count(k), 1u) << s.name << " on " << track.name;
    const uint32_t oi = op_of[k];
    const Op& o = m.ops[oi];
    EXPECT_EQ(process.name.rfind(ProcName(m, o.proc) + " (", 0), 0u) << process.name;
    EXPECT_EQ(track.name.rfind(ExportCommName(m.comms[o.comm]), 0), 0u) << track.name;
    if (s.category == "gpu") {
      ++gpu;
      EXPECT_TRUE(o.has_gpu);
      EXPECT_EQ(s.begin, o.gpu_start_ns - origin);
      EXPECT_EQ(s.end, o.gpu_end_ns() - origin);
      continue;
    }
    ++cpu;
    EXPECT_TRUE(seen.insert(oi).second) << "op drawn twice";
    EXPECT_EQ(s.begin, o.start_ns - origin);
    if (o.state == OpState::kCompleted && o.done_ns != kNoTime) {
      EXPECT_EQ(s.end, o.done_ns - origin);
    } else if (live.Unfinished(oi)) {
      EXPECT_EQ(s.end, JobSpan(m).second - origin) << "an unfinished op runs to the end";
      EXPECT_NE(s.name.find(live.Hung(oi) ? "(STUCK)" : "(in flight)"), std::string::npos) << s.name;
    }
  }
  EXPECT_EQ(cpu, cpu_ops);
  size_t with_gpu = 0;
  for (const Op& o : m.ops) with_gpu += o.has_gpu && o.start_ns != kNoTime;
  EXPECT_EQ(gpu, with_gpu);
  size_t flows = 0;
  ExpectFlowsInTimeOrder(m, r, &flows);
  size_t linked = 0;  // matches with two or more drawn ops
  for (const Match& mt : m.matches) {
    size_t n = 0;
    for (uint32_t oi : mt.ops) n += oi != kNone && m.ops[oi].start_ns != kNoTime;
    linked += n >= 2;
  }
  EXPECT_EQ(flows, linked);
  EXPECT_GT(flows, 40u);
  // Its stuck reports: instants on the process tracks.
  size_t stucks = 0;
  for (const Proc& p : m.procs) stucks += p.stucks.size();
  EXPECT_EQ(r.instants.size(), stucks);
  for (const ReadSlice& in : r.instants) {
    EXPECT_EQ(in.name, "stuck report");
    EXPECT_EQ(r.tracks.at(in.track).parent, 0u);
  }
}

// --from/--to and --ranks cut the protobuf output as they cut the JSON.
TEST(PerfettoTest, WindowAndRanksCut) {
  Job j("world", 4);
  for (int r = 0; r < 4; ++r) {
    j.Add(r, "AllReduce", 0, 1'000'000 + r * 1000, 2'000'000);
    j.Add(r, "AllReduce", 1, 5'000'000 + r * 1000, 6'000'000);
  }
  ExportOptions o;
  o.from_ns = 4'000'000;
  o.to_ns = 7'000'000;
  o.ranks = {1, 3};
  const ReadTrace r = Read(Bytes(j.m, o));
  ASSERT_EQ(r.slices.size(), 2u);
  for (const ReadSlice& s : r.slices) {
    EXPECT_EQ(s.args.at("seq").int_value(), 1);
    const int64_t rank = s.args.at("rank").int_value();
    EXPECT_TRUE(rank == 1 || rank == 3) << rank;
    EXPECT_EQ(s.begin, 5'000'000 + rank * 1000);  // times stay on the job's timeline
  }
  size_t processes = 0;
  for (auto& [uuid, t] : r.tracks) processes += t.parent == 0;
  EXPECT_EQ(processes, 2u);
}

}  // namespace
}  // namespace ncclwatch::tools
