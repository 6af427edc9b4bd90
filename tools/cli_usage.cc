#include "tools/cli_usage.h"

#include <absl/strings/str_cat.h>

#include "tools/commands.h"
#include "tools/model/liveness.h"
#include "tools/summary/summary.h"

namespace ncclwatch::tools {
namespace {

// The defaults the usage texts state, from the structs that hold them, so
// that a default is written once.
struct Defaults {
  double min_wait_sec = LivenessOptions().min_wait_sec;
  double interval_sec = WatchSettings().interval_sec;
  int settle = WatchOptions().settle;
  uint64_t window_ops = WatchOptions().window_ops;
  uint64_t window = SummarizeOptions().window;
  uint64_t max_kb_per_rank = SummarizeOptions().max_bytes_per_rank >> 10;
};

}  // namespace

std::string UsageHead() {
  return "usage: ncclwatch <command> [options] FILE...\n"
    "\n"
    "commands:\n";
}

std::string UsageTail() {
  return "\n"
    "Each takes the trace files of all ranks: files, or folders searched\n"
    "recursively for *.ncclwatch. The files must hold one job: --job ID picks\n"
    "one where they hold several.\n"
    "\n"
    "ncclwatch --version prints the release.\n"
    "Run 'ncclwatch <command> --help' for a command's options. Every command\n"
    "takes --flag=VALUE and --flag VALUE alike, and -- before file names that\n"
    "begin with '-'.\n";
}

std::string DumpUsage() {
  return "usage: ncclwatch dump [--summary] FILE|DIR...\n"
    "\n"
    "Prints each record of each ncclwatch trace file (one line per record,\n"
    "with its byte offset), then a summary: operations enqueued, completed,\n"
    "with GPU timing, never completed; drops; read issues such as a cut tail.\n"
    "A per-node summary (ncclwatch summarize): per process what it keeps and\n"
    "let go, and with records its window's records.\n"
    "  --summary   print only the summary lines\n"
    "  --out FILE, -o FILE  write the report there instead of standard output\n"
    "Exit status: 0 every file read (a cut tail included), 1 a file damaged,\n"
    "2 a path unreadable or not a regular file.\n";
}

std::string DiagnoseUsage() {
  const Defaults kDefaults;
  return absl::StrCat("usage: ncclwatch diagnose [--format=text|json] FILE|DIR...\n"
    "\n"
    "Reads every rank's trace file (a directory: every *.ncclwatch in it) and\n"
    "says what went wrong and who caused it. The first line is the verdict;\n"
    "then the evidence per rank, what completed before the problem, stuck\n"
    "reports, input issues and clock alignment.\n"
    "  --format=text   for people (default)\n"
    "  --format=json   the same content as a ncclwatch.report.Diagnosis message in JSON\n"
    "  --min-wait=SEC  an operation in flight this long is a hang (default ", kDefaults.min_wait_sec, ")\n"
    "  --json          the same as --format=json\n"
    "  --job ID        only the files of job ID (the launcher's job id in each header)\n"
    "  --refine-args   of per-node summaries: print instead the argument that\n"
    "                  makes summarize's second round name the operation where\n"
    "                  the signature chains found ranks to diverge\n"
    "                  (--collectives=...), nothing when none needs it; exit 0,\n"
    "                  or 2 when no input is usable\n"
    "  --fr PATH,...   PyTorch Flight Recorder dumps (files or folders); dumps\n"
    "                  among the inputs (pickles named ..._RANK) are read anyway.\n"
    "                  They name each communicator's process group and give each\n"
    "                  rank's Python call; without them nothing changes\n"
    "  --ras FILE      an answer of NCCL's RAS saved by 'ncclwatch ras' (JSON or\n"
    "                  text): what RAS says (dead or unresponsive processes,\n"
    "                  communicators stuck in init, launch counts) goes under\n"
    "                  the verdict, with where it agrees or disagrees; the\n"
    "                  verdict and exit status stay the traces'\n"
    "  --out FILE, -o FILE  write the report there instead of standard output\n"
    "Exit status: 0 healthy, 1 a problem found (a straggler alone included),\n"
    "2 unusable input, 3 the evidence is incomplete or damaged (files missing or\n"
    "damaged, events lost): the first line says why, and is never OK.\n");
}

std::string MergeUsage() {
  return "usage: ncclwatch merge [--format=text|json|pb] [--out FILE] FILE|DIR...\n"
    "\n"
    "Reads every rank's trace file (files, or directories of *.ncclwatch), links\n"
    "the ranks of each communicator, matches each collective across its ranks\n"
    "(by NCCL's sequence number) and each send with its receive, aligns the\n"
    "clocks of all hosts, and prints the cross-rank order of operations: an\n"
    "order that respects every rank's program order and every collective and\n"
    "send/recv dependency.\n"
    "  --format=text   a table (default)\n"
    "  --format=json   the MergeReport message (proto/order.proto) as JSON\n"
    "  --format=pb     the MergeReport message, binary protobuf\n"
    "  --out FILE, -o FILE  write there instead of standard output\n"
    "  --job ID        only the files of job ID (the launcher's job id in each header)\n"
    "Exit status: 0, or 2 when no input could be used.\n";
}

std::string ExportUsage() {
  return "usage: ncclwatch export [--format=json|perfetto] [--out FILE] [--from SEC] [--to SEC]\n"
    "                        [--around-finding] [--ranks LIST] FILE|DIR...\n"
    "\n"
    "Writes the job as a timeline: a process per rank, a track per communicator\n"
    "with each operation from enqueue to completion, a GPU track with its kernel\n"
    "time, operations that hung drawn to the end as '(STUCK)' (those the files\n"
    "end on too soon to call a hang as '(in flight)'; the judgement diagnose\n"
    "makes), the stuck reports as instant events, and each operation linked\n"
    "across its ranks by a flow in arrival order. Times in seconds since the\n"
    "job's first record, on the aligned timeline.\n"
    "  --format=json      a Chrome trace (JSON; the default): chrome://tracing or\n"
    "                     ui.perfetto.dev, up to a few hundred thousand operations\n"
    "  --format=perfetto  Perfetto's own protobuf format: ui.perfetto.dev, any size\n"
    "  --from SEC, --to SEC  only operations that overlap this window (seconds on\n"
    "                     the job's timeline, as the viewer shows them)\n"
    "  --around-finding   the window is diagnose's first finding's operation, one\n"
    "                     second either side (not with --from/--to)\n"
    "  --ranks LIST       only these ranks, e.g. 0,2-5 (the ranks the tracks are named by)\n"
    "  --out FILE, -o FILE  write to FILE (default: standard output)\n"
    "  --job ID        only the files of job ID (the launcher's job id in each header)\n"
    "Progress goes to standard error when it is a terminal.\n";
}

std::string StatsUsage() {
  return "usage: ncclwatch stats [--format=text|json|openmetrics|prometheus] FILE|DIR...\n"
    "\n"
    "Per communicator, function and message size (power-of-two buckets of\n"
    "bytes as nccl-tests counts them): calls, latency p50/p99 (GPU kernel\n"
    "time where the trace has it, else CPU enqueue-to-completion, marked\n"
    "'cpu'), algorithm and bus bandwidth at the median latency (nccl-tests'\n"
    "formulas), enqueue-to-kernel delay and arrival skew across ranks. Each\n"
    "rank's first timed operation of a row is warm-up, left out ('warmup').\n"
    "Samples count rank operations: a collective on 4 ranks is 1 call and up\n"
    "to 4 samples.\n"
    "  --format=text   an aligned table (the default)\n"
    "  --format=json   JSON (proto/stats.proto, message Stats) with the samples\n"
    "                  and each rank's arrival: a baseline for 'ncclwatch check'\n"
    "  --format=openmetrics  the per-row figures in the OpenMetrics text format\n"
    "  --format=prometheus   the same in the Prometheus text format, for\n"
    "                  node_exporter's textfile collector or the Pushgateway\n"
    "  --job ID        only the files of job ID (the launcher's job id in each\n"
    "                  header); the metrics then carry the label job_id=\"ID\"\n"
    "  --out FILE, -o FILE  write the report there instead of standard output\n";
}

std::string CheckUsage() {
  return "usage: ncclwatch check --baseline FILE [--baseline FILE]... [--tolerance METRIC=PCT]...\n"
    "                       [--junit FILE] [--strict] [--allow-incomplete=cuda-graphs]\n"
    "                       [--format=text|json] FILE|DIR...\n"
    "\n"
    "The CI gate: compares the run's stats with a baseline made by\n"
    "'ncclwatch stats --format=json' (rows of the same communicator name and\n"
    "size, function and size bucket; each rank's arrival), and runs 'diagnose'.\n"
    "Each metric is judged on the samples of both sides: its change with a\n"
    "98% bootstrap interval (fixed seed). It regresses when the interval\n"
    "excludes no change and the change is worse than its tolerance. A metric\n"
    "whose interval reaches 1.5x without being significant is NOISY: reported,\n"
    "not judged. The first line is PASS or FAIL with why. Fails (exit 1) on a\n"
    "regression, any diagnose finding of error severity (hang, mismatch, dead\n"
    "rank, late rank...), incomplete evidence, or when nothing was judged.\n"
    "  --baseline FILE           a baseline stats JSON; several (one per run of\n"
    "                            the job) are pooled, and a change within their\n"
    "                            run-to-run spread is no regression\n"
    "  --tolerance METRIC=PCT    the smallest change that fails, in percent of\n"
    "                            the baseline (METRIC=off: not compared);\n"
    "                            repeatable, or comma-separated. Defaults:\n"
    "                            latency_p50=10, latency_p99=20, busbw=10 (below\n"
    "                            100), arrival=10ms (a time: a rank's median\n"
    "                            lateness at collectives). Also: algbw,\n"
    "                            delay_p50, delay_p99, skew_p50, skew_p99.\n"
    "  --junit FILE              also write a JUnit XML report for CI systems\n"
    "  --strict                  baseline rows missing from the run, and NOISY\n"
    "                            metrics, fail too (by default: reported only)\n"
    "  --allow-incomplete=cuda-graphs\n"
    "                            pass a job that ran NCCL calls captured into\n"
    "                            CUDA graphs: those cannot be matched across\n"
    "                            ranks, so they are not checked, and the PASS\n"
    "                            line says so. Only where every process of the\n"
    "                            job finalized its communicators; any other\n"
    "                            gap in the evidence still fails\n"
    "  --format=json             the report as JSON (proto/stats.proto CheckReport)\n"
    "  --job ID        only the files of job ID (the launcher's job id in each header)\n"
    "  --out FILE, -o FILE  write the report there instead of standard output\n"
    "Exit status: 0 pass, 1 fail, 2 unusable input.\n";
}

std::string WatchUsage() {
  const Defaults kDefaults;
  return absl::StrCat("usage: ncclwatch watch [--interval SEC] [--settle N] [--timeout SEC] [--format=text|json] DIR|FILE...\n"
    "\n"
    "Follows every rank's trace file while the job runs (on a shared filesystem,\n"
    "or gathered), and prints diagnose's verdict as soon as the evidence\n"
    "suffices: when every file is finalized, or when a problem (a hang, a\n"
    "mismatch, a dead rank...) holds for --settle polls. Folders are searched\n"
    "for *.ncclwatch at every poll: ranks that start later are followed too.\n"
    "Standard output holds only the verdict, as diagnose prints it; progress\n"
    "goes to standard error. While the job runs, an operation counts as hung\n"
    "after the plugin's stuck threshold (NCCLWATCH_STUCK_SEC, in the files), and\n"
    "the job is judged as of the latest time every file covers. Memory stays\n"
    "bounded: what every rank has finished is let go, from every file at once.\n"
    "  --interval SEC   seconds between polls (default ", kDefaults.interval_sec, ")\n"
    "  --settle N       polls a problem must hold before it is printed (default ", kDefaults.settle, ")\n"
    "  --timeout SEC    then print the verdict on what was read, as diagnose\n"
    "                   would, and exit (default 0: no timeout)\n"
    "  --window-ops N   operations kept per file, at most (default ", kDefaults.window_ops, "); past\n"
    "                   it the oldest go even unfinished on some rank, and the\n"
    "                   verdict says the evidence is incomplete\n"
    "  --min-wait SEC   an operation in flight this long is a hang (default: the\n"
    "                   files' NCCLWATCH_STUCK_SEC while the job runs, ", kDefaults.min_wait_sec, " once it\n"
    "                   is over)\n"
    "  --ras[=HOST:PORT]  also ask NCCL's RAS (default 127.0.0.1:28028;\n"
    "                   NCCL_RAS_ADDR of the job), once per poll at most, a few\n"
    "                   seconds at most each: its view goes under the verdict\n"
    "                   (as diagnose --ras), which stays the traces'; not\n"
    "                   reachable is said, not an error\n"
    "  --format=text|json, --json, --job ID, --fr PATH,..., --out FILE, -o FILE\n"
    "                   as for diagnose\n"
    "SIGINT or SIGTERM: the verdict on what was read, then exit.\n"
    "Exit status: diagnose's: 0 healthy, 1 a problem found, 2 unusable input,\n"
    "3 the evidence is incomplete or damaged.\n");
}

std::string SummarizeUsage() {
  const Defaults kDefaults;
  return absl::StrCat("usage: ncclwatch summarize -o OUT [--window N] [--max-kb-per-rank KB]\n"
    "                           [--collectives COMM:FROM-TO,...] FILE|DIR...\n"
    "\n"
    "Reduces the trace files of one node (or any set of ranks) to one summary\n"
    "file, a few KB per rank whatever the job's length, for a job too large to\n"
    "gather every trace on one machine. diagnose, merge, stats and check read\n"
    "summaries and trace files, mixed (folders: *.ncclwatch and *.ncclsummary;\n"
    "stats' quantiles from a summary's histograms are within 1%); export needs\n"
    "the traces. Where the summaries cannot tell what the\n"
    "traces would, the verdict says INCOMPLETE and why (exit 3), never a guess.\n"
    "Given summaries (*.ncclsummary), alone or beside trace files, it writes\n"
    "one group summary of them: their processes, checked, each window cut to\n"
    "the group's by the rule a node applies (default ", kGroupWindow, " operations), and what\n"
    "could not be read, so that diagnose of the group gives the verdict of its\n"
    "nodes' summaries (a job of many nodes: one per 64).\n"
    "  --out FILE, -o FILE  the summary to write (name it NODE.ncclsummary)\n"
    "  --window N   operations kept per rank and communicator besides those not\n"
    "               finished (default ", kDefaults.window, "; a group's: ", kGroupWindow, "); older completed\n"
    "               ones are let go\n"
    "  --max-kb-per-rank KB  the most one rank's summary holds (default ", kDefaults.max_kb_per_rank, "; 0:\n"
    "               no cap). Past it the chain's checkpoints are thinned, then\n"
    "               the window's oldest operations go, and a verdict that needed\n"
    "               them says INCOMPLETE\n"
    "  --collectives COMM:FROM-TO,...  the second round: where diagnose of\n"
    "               the summaries says ranks diverged between two collectives\n"
    "               (the signature chains), keep those collectives too, so the\n"
    "               next diagnose names the operation. COMM is the\n"
    "               communicator's hash in hex, FROM-TO positions of its\n"
    "               collectives from 1 (all functions counted); `ncclwatch\n"
    "               diagnose --refine-args SUMMARIES` prints the argument. At\n"
    "               most 64 collectives a range, 16 ranges a communicator and\n"
    "               16 communicators; outside --max-kb-per-rank. A communicator\n"
    "               no rank here has is said on standard error, not an error\n"
    "  --job ID     only the files of job ID\n"
    "Exit status: 0 written, 2 no usable trace file or not written, 3 written\n"
    "without some files (named on standard error).\n");
}

std::string RasUsage() {
  return "usage: ncclwatch ras [--format=json|text] [--out FILE] [HOST:PORT]\n"
    "\n"
    "Asks NCCL's RAS service (NCCL 2.24 and later runs it in every process of a\n"
    "job, on 127.0.0.1:28028 unless NCCL_RAS_ADDR says otherwise) for its view\n"
    "of the job, and prints its answer as it came: which processes are dead or\n"
    "unresponsive, each communicator's status and how many collectives each rank\n"
    "launched. Save it for 'ncclwatch diagnose --ras FILE' (NCCLWATCH_ON_STUCK\n"
    "can run it). HOST is a numeric address or localhost. It takes a few\n"
    "seconds at most (about 11 s when RAS accepts and never answers).\n"
    "  --format=json   RAS's JSON where it gives it (NCCL 2.28.7 and later),\n"
    "                  else its text (the default)\n"
    "  --format=text   RAS's own text report (VERBOSE STATUS)\n"
    "  --out FILE, -o FILE  write the answer there instead of standard output\n"
    "Exit status: 0 printed, 1 RAS not reachable or its answer cut short (said\n"
    "on standard error), 2 a usage error.\n";
}

}  // namespace ncclwatch::tools
