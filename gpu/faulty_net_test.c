// Drives libnccl-net-faulty.so as NCCL does, over loopback, with no GPU:
// dlopens the built .so (its path is argv[1]), checks the exported tables of
// every ABI version, connects with the non-blocking listen/connect/accept,
// moves messages of several sizes with several requests in flight, and checks
// each fault: "stop" holds every send and no receive, "link" one connection
// of two, "slow" delays each message by at least NET_FAULT_SLOW_MS; a peer
// that closes gives an error from test(), not a crash.
//
// Where a fault must keep something from happening, the test polls test()
// for kQuietNs (200 ms) and checks that it did not happen: a deliberate wait
// for what must not come, not a wait for something that will. Every other
// wait polls until what it needs is there, bounded by kHangNs against a hang.
// Timing is asserted only as a lower bound ("slow" takes at least its delay).
//
// Run by //gpu:faulty_net_test and gpu/faulty_net_test.sh.

#define _GNU_SOURCE
#include "faulty_net.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int64_t kQuietNs = 200 * 1000000LL;
static const int64_t kHangNs = 20 * 1000000000LL;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static int64_t NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- A logger that keeps what the plugin said
// --------------------------------

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log_text[1 << 16];

static void Logger(ncclDebugLogLevel level, unsigned long flags,
                   const char* file, int line, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[log %d %s:%d] %s\n", (int)level, file, line, msg);
  pthread_mutex_lock(&g_log_mu);
  size_t used = strlen(g_log_text);
  snprintf(g_log_text + used, sizeof(g_log_text) - used, "%s\n", msg);
  pthread_mutex_unlock(&g_log_mu);
}

static int LogHas(const char* needle) {
  pthread_mutex_lock(&g_log_mu);
  int has = strstr(g_log_text, needle) != NULL;
  pthread_mutex_unlock(&g_log_mu);
  return has;
}

static void LogClear(void) {
  pthread_mutex_lock(&g_log_mu);
  g_log_text[0] = '\0';
  pthread_mutex_unlock(&g_log_mu);
}

// ---- One calling convention over the three tables
// ----------------------------

static const ncclNet_v8_t* v8;
static const ncclNet_v9_t* v9;
static const ncclNet_v10_t* v10;
static ncclwatch_net_fault_arm_t arm;

typedef struct {
  const char* name;
  ncclResult_t (*listen)(int, void*, void**);
  ncclResult_t (*accept)(void*, void**, ncclNetDeviceHandle_v8_t**);
  ncclResult_t (*test)(void*, int*, int*);
  ncclResult_t (*close_send)(void*);
  ncclResult_t (*close_recv)(void*);
  ncclResult_t (*close_listen)(void*);
  ncclResult_t (*connect)(int version, void* handle, void** comm);
  ncclResult_t (*isend)(int version, void* comm, void* data, size_t size,
                        void** req);
  ncclResult_t (*irecv)(int version, void* comm, void* data, size_t size,
                        void** req);
  int version;
} Api;

static ncclResult_t Connect(int version, void* handle, void** comm) {
  ncclNetDeviceHandle_v8_t* dev = NULL;
  ncclNetCommConfig_v10_t config = {.trafficClass = -1};
  if (version == 8) return v8->connect(0, handle, comm, &dev);
  if (version == 9) return v9->connect(0, handle, comm, &dev);
  return v10->connect(0, &config, handle, comm, &dev);
}

static ncclResult_t Isend(int version, void* comm, void* data, size_t size,
                          void** req) {
  if (version == 8) return v8->isend(comm, data, (int)size, 0, NULL, req);
  if (version == 9) return v9->isend(comm, data, size, 0, NULL, req);
  return v10->isend(comm, data, size, 0, NULL, NULL, req);
}

static ncclResult_t Irecv(int version, void* comm, void* data, size_t size,
                          void** req) {
  int tag = 0;
  void* mh = NULL;
  void* ph = NULL;
  if (version == 8) {
    int s = (int)size;
    return v8->irecv(comm, 1, &data, &s, &tag, &mh, req);
  }
  if (version == 9) return v9->irecv(comm, 1, &data, &size, &tag, &mh, req);
  return v10->irecv(comm, 1, &data, &size, &tag, &mh, &ph, req);
}

static Api MakeApi(int version) {
  Api a = {.connect = Connect, .isend = Isend, .irecv = Irecv};
  a.version = version;
  if (version == 8) {
    a.name = "v8";
    a.listen = v8->listen;
    a.accept = v8->accept;
    a.test = v8->test;
    a.close_send = v8->closeSend;
    a.close_recv = v8->closeRecv;
    a.close_listen = v8->closeListen;
  } else if (version == 9) {
    a.name = "v9";
    a.listen = v9->listen;
    a.accept = v9->accept;
    a.test = v9->test;
    a.close_send = v9->closeSend;
    a.close_recv = v9->closeRecv;
    a.close_listen = v9->closeListen;
  } else {
    a.name = "v10";
    a.listen = v10->listen;
    a.accept = v10->accept;
    a.test = v10->test;
    a.close_send = v10->closeSend;
    a.close_recv = v10->closeRecv;
    a.close_listen = v10->closeListen;
  }
  return a;
}

// ---- Helpers
// -------------------------------------------------------------------

typedef struct {
  void* send;
  void* recv;
} Link;

// listen, then connect and accept in turns as NCCL's proxy does, until both
// comms exist. accept() before any connect() must come back empty at once:
// a blocking accept would hang here.
static Link Open(const Api* a) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = NULL;
  CHECK(a->listen(0, handle, &listen_comm) == ncclSuccess, "%s listen",
        a->name);
  CHECK(listen_comm != NULL, "%s listen gave no comm", a->name);
  Link l = {NULL, NULL};
  CHECK(a->accept(listen_comm, &l.recv, NULL) == ncclSuccess, "accept");
  CHECK(l.recv == NULL, "%s accept with no peer returned a comm", a->name);
  int64_t until = NowNs() + kHangNs;
  while (l.send == NULL || l.recv == NULL) {
    if (l.send == NULL) {
      CHECK(a->connect(a->version, handle, &l.send) == ncclSuccess, "connect");
    }
    if (l.recv == NULL) {
      CHECK(a->accept(listen_comm, &l.recv, NULL) == ncclSuccess, "accept");
    }
    CHECK(NowNs() < until, "%s connect/accept never finished", a->name);
  }
  CHECK(a->close_listen(listen_comm) == ncclSuccess, "closeListen");
  return l;
}

static void* Send(const Api* a, void* comm, void* data, size_t size) {
  void* req = NULL;
  int64_t until = NowNs() + kHangNs;
  while (req == NULL) {
    CHECK(a->isend(a->version, comm, data, size, &req) == ncclSuccess, "isend");
    CHECK(NowNs() < until, "isend never took the request");
  }
  return req;
}

static void* Recv(const Api* a, void* comm, void* data, size_t size) {
  void* req = NULL;
  int64_t until = NowNs() + kHangNs;
  while (req == NULL) {
    CHECK(a->irecv(a->version, comm, data, size, &req) == ncclSuccess, "irecv");
    CHECK(NowNs() < until, "irecv never took the request");
  }
  return req;
}

// test() once; returns done, and the size in *size.
static int Poll(const Api* a, void* req, int* size) {
  int done = 0;
  CHECK(a->test(req, &done, size) == ncclSuccess, "%s test failed", a->name);
  return done;
}

static int Wait(const Api* a, void* req) {
  int size = -1;
  int64_t until = NowNs() + kHangNs;
  while (!Poll(a, req, &size)) {
    CHECK(NowNs() < until, "%s request never completed", a->name);
  }
  return size;
}

// Waits for a send and the receive it feeds together: a send moves only
// while test() is called on it, as NCCL's proxy does. Returns the received
// size; checks the sent one.
static int WaitPair(const Api* a, void* s, void* r, int sent_size) {
  int ssize = -1, rsize = -1, sdone = 0, rdone = 0;
  int64_t until = NowNs() + kHangNs;
  while (!sdone || !rdone) {
    if (!sdone) sdone = Poll(a, s, &ssize);
    if (!rdone) rdone = Poll(a, r, &rsize);
    CHECK(NowNs() < until, "%s: send done %d, receive done %d", a->name, sdone,
          rdone);
  }
  CHECK(ssize == sent_size, "%s sent %d bytes, want %d", a->name, ssize,
        sent_size);
  return rsize;
}

static void Fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(seed * 131 + i * 7);
}

// One message each way through `l`, checked byte for byte.
static void RoundTrip(const Api* a, Link l, size_t size, unsigned seed) {
  unsigned char* out = malloc(size + 1);
  unsigned char* in = calloc(1, size + 64);
  Fill(out, size, seed);
  void* s = Send(a, l.send, out, size);
  void* r = Recv(a, l.recv, in, size + 64);
  CHECK(WaitPair(a, s, r, (int)size) == (int)size, "%s received size", a->name);
  CHECK(memcmp(in, out, size) == 0, "%s bytes of a %zu-byte message", a->name,
        size);
  free(out);
  free(in);
}

// ---- The checks
// ------------------------------------------------------------------

static void TestTables(void) {
  CHECK(strcmp(v8->name, "faulty") == 0 && strcmp(v9->name, "faulty") == 0 &&
            strcmp(v10->name, "faulty") == 0,
        "every table is named faulty");
  CHECK(v8->init(Logger) == ncclSuccess, "v8 init");
  CHECK(v9->init(Logger) == ncclSuccess, "v9 init");
  CHECK(v10->init(Logger, NULL) == ncclSuccess, "v10 init");
  int n = 0;
  CHECK(v8->devices(&n) == ncclSuccess && n == 1, "one device, got %d", n);
  ncclNetProperties_v8_t p8;
  CHECK(v8->getProperties(0, &p8) == ncclSuccess, "v8 getProperties");
  CHECK(strcmp(p8.name, "faulty") == 0, "device name %s", p8.name);
  CHECK(p8.ptrSupport == NCCL_PTR_HOST && p8.maxRecvs == 1 && p8.maxComms > 0 &&
            p8.speed > 0 && p8.netDeviceType == NCCL_NET_DEVICE_HOST,
        "v8 properties");
  ncclNetProperties_v10_t p10;
  CHECK(v10->getProperties(0, &p10) == ncclSuccess, "v10 getProperties");
  CHECK(strcmp(p10.name, "faulty") == 0 && p10.ptrSupport == NCCL_PTR_HOST &&
            p10.maxRecvs == 1 && p10.vProps.ndevs == 1 &&
            p10.maxP2pBytes >= (size_t)1 << 30,
        "v10 properties");
  CHECK(v9->getProperties(1, (ncclNetProperties_v9_t*)&p10) != ncclSuccess,
        "device 1 does not exist");
  void* mh = &mh;
  CHECK(v9->regMr(NULL, &n, sizeof(n), NCCL_PTR_HOST, &mh) == ncclSuccess,
        "regMr of host memory");
  CHECK(v9->deregMr(NULL, mh) == ncclSuccess, "deregMr");
  CHECK(v9->regMr(NULL, &n, sizeof(n), NCCL_PTR_CUDA, &mh) != ncclSuccess,
        "regMr of CUDA memory is refused");
  CHECK(v8->regMrDmaBuf == NULL && v10->regMrDmaBuf == NULL, "no DMA-BUF");
  void* req = NULL;
  int done = 0;
  CHECK(
      v8->iflush(NULL, 1, NULL, NULL, NULL, &req) == ncclSuccess && req != NULL,
      "iflush gives a request");
  CHECK(v8->test(req, &done, NULL) == ncclSuccess && done, "flush done");
  CHECK(arm("nonsense") == -1 && LogHas("unknown mode"), "bad mode refused");
}

// Messages of 0, 1, 4097 and 1 MiB bytes, all in flight before the first
// receive is posted, received into larger buffers, in order.
static void TestData(const Api* a) {
  Link l = Open(a);
  enum { kN = 6 };
  const size_t sizes[kN] = {0, 1, 1 << 20, 4097, 0, 3};
  unsigned char* out[kN];
  unsigned char* in[kN];
  void* sreq[kN];
  void* rreq[kN];
  for (int i = 0; i < kN; ++i) {
    out[i] = malloc(sizes[i] + 1);
    in[i] = calloc(1, sizes[i] + 100);
    Fill(out[i], sizes[i], (unsigned)i);
    sreq[i] = Send(a, l.send, out[i], sizes[i]);
  }
  for (int i = 0; i < kN; ++i) {
    rreq[i] = Recv(a, l.recv, in[i], sizes[i] + 100);
  }
  int sdone = 0, rdone = 0;
  int64_t until = NowNs() + kHangNs;
  while (sdone < kN || rdone < kN) {
    int size = -1;
    if (sdone < kN && Poll(a, sreq[sdone], &size)) {
      CHECK(size == (int)sizes[sdone], "send %d size %d", sdone, size);
      ++sdone;
    }
    if (rdone < kN && Poll(a, rreq[rdone], &size)) {
      CHECK(size == (int)sizes[rdone], "recv %d size %d", rdone, size);
      CHECK(memcmp(in[rdone], out[rdone], sizes[rdone]) == 0, "bytes of %d",
            rdone);
      ++rdone;
    }
    CHECK(NowNs() < until, "%s: %d/%d sends, %d/%d receives done", a->name,
          sdone, kN, rdone, kN);
  }
  for (int i = 0; i < kN; ++i) {
    free(out[i]);
    free(in[i]);
  }
  RoundTrip(a, l, 12345, 7);
  CHECK(a->close_send(l.send) == ncclSuccess, "closeSend");
  CHECK(a->close_recv(l.recv) == ncclSuccess, "closeRecv");
}

// A message longer than the posted receive is an error, not an overrun.
static void TestTooLong(const Api* a) {
  Link l = Open(a);
  char out[100] = {0}, in[10 + 16];
  memset(in, 0x5a, sizeof(in));
  void* s = Send(a, l.send, out, sizeof(out));
  void* r = Recv(a, l.recv, in, 10);
  int done = 0, size = 0;
  ncclResult_t res = ncclSuccess;
  int64_t until = NowNs() + kHangNs;
  while (res == ncclSuccess && !done) {
    res = a->test(r, &done, &size);
    CHECK(NowNs() < until, "the long message was never noticed");
  }
  CHECK(res == ncclInternalError, "too long: result %d", (int)res);
  CHECK((unsigned char)in[10] == 0x5a, "nothing past the posted size");
  (void)s;
  a->close_send(l.send);
  a->close_recv(l.recv);
}

static void* ArmStop(void* unused) {
  (void)unused;
  CHECK(arm("stop") == 0, "arm stop");
  return NULL;
}

// "stop": no send completes and no byte arrives, while a receive (of a
// message sent before arming) still completes; "off" lets the held message
// go, whole. Armed from another thread, as ctypes would.
static void TestStop(const Api* a) {
  Link x = Open(a), y = Open(a);
  char early[] = "sent before the fault", held[] = "held by the fault";
  char got_early[64] = {0}, got_held[64] = {0};
  void* s_early = Send(a, y.send, early, sizeof(early));
  CHECK(Wait(a, s_early) == (int)sizeof(early), "early send");
  LogClear();
  pthread_t t;
  pthread_create(&t, NULL, ArmStop, NULL);
  pthread_join(t, NULL);
  CHECK(LogHas("fault 'stop' armed"), "arming is logged");
  char pid[32];
  snprintf(pid, sizeof(pid), "pid %d", (int)getpid());
  CHECK(LogHas(pid), "the log names the pid");
  void* s = Send(a, x.send, held, sizeof(held));
  void* r = Recv(a, x.recv, got_held, sizeof(got_held));
  void* r_early = Recv(a, y.recv, got_early, sizeof(got_early));
  int early_done = 0, size = 0;
  // Deliberate: nothing may complete on x during kQuietNs.
  for (int64_t end = NowNs() + kQuietNs; NowNs() < end;) {
    CHECK(!Poll(a, s, &size), "a send completed under 'stop'");
    CHECK(!Poll(a, r, &size), "bytes arrived under 'stop'");
    if (!early_done && Poll(a, r_early, &size)) {
      early_done = 1;
      CHECK(size == (int)sizeof(early), "early size");
    }
  }
  if (!early_done) CHECK(Wait(a, r_early) == (int)sizeof(early), "early");
  CHECK(strcmp(got_early, early) == 0, "receives go on under 'stop'");
  CHECK(arm("off") == 0, "arm off");
  CHECK(WaitPair(a, s, r, sizeof(held)) == (int)sizeof(held),
        "the held message after 'off'");
  CHECK(strcmp(got_held, held) == 0, "held bytes kept whole");
  a->close_send(x.send);
  a->close_recv(x.recv);
  a->close_send(y.send);
  a->close_recv(y.recv);
}

// "link": the first send comm used after arming stops; another goes on.
static void TestLink(const Api* a) {
  Link x = Open(a), y = Open(a);
  RoundTrip(a, x, 100, 1);  // both work before arming
  RoundTrip(a, y, 100, 2);
  LogClear();
  CHECK(arm("link") == 0, "arm link");
  char mx[] = "on the stopped link", my[] = "on the other link";
  char gx[64] = {0}, gy[64] = {0};
  void* sx = Send(a, x.send, mx, sizeof(mx));  // the first: this one stops
  CHECK(LogHas("fault 'link' stops send connection 127.0.0.1:"),
        "the stopped connection is logged");
  void* sy = Send(a, y.send, my, sizeof(my));
  void* rx = Recv(a, x.recv, gx, sizeof(gx));
  void* ry = Recv(a, y.recv, gy, sizeof(gy));
  CHECK(WaitPair(a, sy, ry, sizeof(my)) == (int)sizeof(my),
        "the other link's message");
  CHECK(strcmp(gy, my) == 0, "the other link's bytes");
  int size = 0;
  // Deliberate: nothing may complete on x during kQuietNs.
  for (int64_t end = NowNs() + kQuietNs; NowNs() < end;) {
    CHECK(!Poll(a, sx, &size), "a send on the stopped link completed");
    CHECK(!Poll(a, rx, &size), "bytes came over the stopped link");
  }
  RoundTrip(a, y, 5000, 3);  // the other link still works
  CHECK(arm("off") == 0, "arm off");
  CHECK(WaitPair(a, sx, rx, sizeof(mx)) == (int)sizeof(mx), "after off");
  CHECK(strcmp(gx, mx) == 0, "the held bytes, whole, after off");
  a->close_send(x.send);
  a->close_recv(x.recv);
  a->close_send(y.send);
  a->close_recv(y.recv);
}

// "slow": each message takes at least NET_FAULT_SLOW_MS; two in a row at
// least twice that. A bad value is named in the log and the default kept.
static void TestSlow(const Api* a) {
  Link l = Open(a);
  setenv("NET_FAULT_SLOW_MS", "fifty", 1);
  LogClear();
  CHECK(arm("slow") == 0, "arm slow");
  CHECK(LogHas("NET_FAULT_SLOW_MS='fifty'"), "the bad value is named");
  CHECK(LogHas("20 ms per message"), "the default is kept");
  setenv("NET_FAULT_SLOW_MS", "60", 1);
  CHECK(arm("slow") == 0, "arm slow");
  CHECK(LogHas("60 ms per message"), "the delay is logged");
  char m1[] = "slow one", m2[] = "slow two", g1[16] = {0}, g2[16] = {0};
  int64_t t0 = NowNs();
  void* s1 = Send(a, l.send, m1, sizeof(m1));
  void* s2 = Send(a, l.send, m2, sizeof(m2));
  void* r1 = Recv(a, l.recv, g1, sizeof(g1));
  void* r2 = Recv(a, l.recv, g2, sizeof(g2));
  CHECK(Wait(a, s1) == (int)sizeof(m1), "slow send 1");
  int64_t t1 = NowNs();
  CHECK(Wait(a, s2) == (int)sizeof(m2), "slow send 2");
  int64_t t2 = NowNs();
  CHECK(Wait(a, r1) == (int)sizeof(m1) && Wait(a, r2) == (int)sizeof(m2),
        "slow receives");
  CHECK(strcmp(g1, m1) == 0 && strcmp(g2, m2) == 0, "slow bytes");
  CHECK(t1 - t0 >= 60 * 1000000LL, "first message after %lld ns",
        (long long)(t1 - t0));
  CHECK(t2 - t0 >= 120 * 1000000LL, "second message after %lld ns",
        (long long)(t2 - t0));
  CHECK(arm("off") == 0, "arm off");
  unsetenv("NET_FAULT_SLOW_MS");
  a->close_send(l.send);
  a->close_recv(l.recv);
}

// NET_FAULT_ARM_AFTER_SEC=0 with NET_FAULT_MODE=stop, read at init: the
// next send is held.
static void TestTimedArm(const Api* a) {
  Link l = Open(a);
  setenv("NET_FAULT_ARM_AFTER_SEC", "0", 1);
  setenv("NET_FAULT_MODE", "stop", 1);
  LogClear();
  CHECK(v9->init(Logger) == ncclSuccess, "init");
  CHECK(LogHas("fault 'stop' arms 0 s from now"), "the timed fault is logged");
  char m[] = "timed", g[16] = {0};
  void* s = Send(a, l.send, m, sizeof(m));
  void* r = Recv(a, l.recv, g, sizeof(g));
  CHECK(LogHas("armed (NET_FAULT_ARM_AFTER_SEC)"), "it armed");
  int size = 0;
  // Deliberate: nothing may complete during kQuietNs.
  for (int64_t end = NowNs() + kQuietNs; NowNs() < end;) {
    CHECK(!Poll(a, s, &size) && !Poll(a, r, &size), "timed stop let it go");
  }
  CHECK(arm("off") == 0, "arm off");
  CHECK(WaitPair(a, s, r, sizeof(m)) == (int)sizeof(m), "after off");
  CHECK(strcmp(g, m) == 0, "the held bytes after off");
  unsetenv("NET_FAULT_ARM_AFTER_SEC");
  unsetenv("NET_FAULT_MODE");
  a->close_send(l.send);
  a->close_recv(l.recv);
}

// A peer that closes: the receiver's test() and, soon, the sender's say
// ncclSystemError.
static void TestPeerCloses(const Api* a) {
  Link l = Open(a);
  char buf[4096] = {0};
  void* r = Recv(a, l.recv, buf, sizeof(buf));
  CHECK(a->close_send(l.send) == ncclSuccess, "closeSend");
  int done = 0, size = 0;
  ncclResult_t res = ncclSuccess;
  int64_t until = NowNs() + kHangNs;
  while (res == ncclSuccess && !done) {
    res = a->test(r, &done, &size);
    CHECK(NowNs() < until, "the receiver never saw the close");
  }
  CHECK(res == ncclSystemError, "receiver: result %d", (int)res);
  CHECK(a->close_recv(l.recv) == ncclSuccess, "closeRecv");

  l = Open(a);
  CHECK(a->close_recv(l.recv) == ncclSuccess, "closeRecv");
  res = ncclSuccess;
  until = NowNs() + kHangNs;
  while (res == ncclSuccess) {  // the first sends may still fit the buffer
    void* s = NULL;
    res = a->isend(a->version, l.send, buf, sizeof(buf), &s);
    done = 0;
    while (res == ncclSuccess && s != NULL && !done) {
      res = a->test(s, &done, &size);
      CHECK(NowNs() < until, "the sender never saw the close");
    }
    CHECK(NowNs() < until, "the sender never saw the close");
  }
  CHECK(res == ncclSystemError, "sender: result %d", (int)res);
  CHECK(a->close_send(l.send) == ncclSuccess, "closeSend");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/libnccl-net-faulty.so\n", argv[0]);
    return 2;
  }
  unsetenv("NET_FAULT_ARM_AFTER_SEC");
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL, "dlopen %s: %s", argv[1], dlerror());
  v8 = dlsym(lib, "ncclNetPlugin_v8");
  v9 = dlsym(lib, "ncclNetPlugin_v9");
  v10 = dlsym(lib, "ncclNetPlugin_v10");
  arm = (ncclwatch_net_fault_arm_t)dlsym(lib, "ncclwatch_net_fault_arm");
  CHECK(v8 && v9 && v10 && arm, "the .so exports v8, v9, v10 and the arm");
  CHECK(dlsym(lib, "FaultyNetTest") == NULL, "the core stays hidden");
  // ctypes.CDLL on the same path gets NCCL's handle, and so the same state.
  void* again = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(again == lib, "a second dlopen shares the handle");
  dlclose(again);

  int tests = 0;
  TestTables();
  ++tests;
  for (int version = 8; version <= 10; ++version) {
    Api a = MakeApi(version);
    TestData(&a);
    TestTooLong(&a);
    TestPeerCloses(&a);
    tests += 3;
  }
  Api a8 = MakeApi(8), a9 = MakeApi(9);
  TestStop(&a8);
  TestLink(&a9);
  TestSlow(&a8);
  TestTimedArm(&a9);
  tests += 4;
  printf("faulty_net_test: PASS (%d tests)\n", tests);
  return 0;
}
