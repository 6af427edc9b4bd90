// libnccl-net-faulty.so: an NCCL network plugin that moves bytes over plain
// TCP on loopback and fails on demand, so that ncclwatch can be shown
// diagnosing network faults while every host lives.
//
// The problem: on one GPU host, ranks that NCCL takes for separate nodes
// (each its own NCCL_HOSTID, NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1) talk
// through NCCL's network transport, and a fault must be injected on that data
// path, on one rank, at a step the job chooses. NCCL's supported seam for the
// data path is an external net plugin (NCCL_NET_PLUGIN=/path/to/this.so), so
// this is one: a device "faulty" (NCCL's log shows NET/faulty), host memory
// only, one receive per request.
//
// How: each connection is one non-blocking TCP socket. listen/connect/accept
// never block the proxy thread (connect and accept keep their progress in the
// handle and the listen comm and return a null comm until done). A comm is a
// FIFO of at most NCCL_NET_MAX_REQUESTS requests; a message is an 8-byte
// length followed by the bytes; test() moves the comm's queue forward in
// order with non-blocking send/recv and never waits (there is no helper
// thread: a comm moves while NCCL tests its requests, as its proxy does
// without pause). A receive's posted size is an upper bound and test()
// reports the size that came.
//
// Faults, armed by the job through ncclwatch_net_fault_arm (ctypes.CDLL on
// the same path returns NCCL's handle) or NET_FAULT_ARM_AFTER_SEC seconds
// after init with NET_FAULT_MODE:
//   stop  no send of this process progresses from then on (test never reports
//         done, the bytes stay here): a rank whose sends stop. Receives go on.
//   link  the same for one connection: the first send comm that isend is
//         called on after arming (one link between two ranks).
//   slow  each message waits NET_FAULT_SLOW_MS (default 20) before its first
//         byte goes, by test() answering not-done until its deadline: a slow
//         link. Nothing sleeps.
//   off   no fault: what was held goes on.
// Arming is logged once through NCCL's logger (INFO, NET), with the pid and,
// for "link", the connection.
//
// Contract: NCCL drives each comm from one proxy thread; the fault state is
// atomics, so arming from any thread is safe. A peer that closes makes
// test() return ncclSystemError. Requests live inside their comm (no
// allocation after connect/accept).
//
// This file is the transport, behind gpu/faulty_net_core.h; the faults and
// the log are in gpu/faulty_net_fault.c, the exported tables in
// gpu/faulty_net_abi.c. Build (as gpu/faulty_net_test.sh does):
//   cc -O2 -shared -fPIC -o out/libnccl-net-faulty.so gpu/faulty_net.c
//       gpu/faulty_net_fault.c gpu/faulty_net_abi.c -lpthread
// Tested by gpu/faulty_net_test.c (//gpu:faulty_net_test).

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "faulty_net_core.h"

// ---- Requests and comms ---------------------------------------------------

enum { kSend = 1, kRecv = 2, kFlush = 3 };
static atomic_ullong g_next_comm_id = 1;  // for the "link" fault
enum { kHeaderBytes = 8 };
static const uint64_t kMagic = 0x74656e79746c7561ULL;  // "aultynet"

struct Comm;

struct Request {
  int kind;
  int used;
  int done;
  struct Comm* comm;
  uint64_t seq;  // place in the comm's FIFO
  char* data;
  uint64_t size;    // send: the message; recv: the posted upper bound
  uint64_t length;  // recv: the message's length, once its header came
  uint64_t moved;   // header and data bytes moved so far
  unsigned char header[kHeaderBytes];
  int64_t not_before;  // "slow": no byte goes before this (0: not yet set)
};

struct Comm {
  int fd;
  int kind;                // kSend or kRecv
  uint64_t id;             // for the "link" fault
  ncclResult_t error;      // sticky once the connection failed
  uint64_t next_post;      // seq of the next request posted
  uint64_t next_progress;  // seq of the request the socket is on
  char desc[96];           // "local -> peer", for the logs
  struct Request req[NCCL_NET_MAX_REQUESTS];
};

// iflush has nothing to do (host memory only): its request is done at once.
static struct Request g_flush_request = {.kind = kFlush, .done = 1};

static void Describe(struct Comm* c) {
  struct sockaddr_in a, b;
  socklen_t la = sizeof(a), lb = sizeof(b);
  char sa[INET_ADDRSTRLEN] = "?", sb[INET_ADDRSTRLEN] = "?";
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  if (getsockname(c->fd, (struct sockaddr*)&a, &la) == 0) {
    inet_ntop(AF_INET, &a.sin_addr, sa, sizeof(sa));
  }
  if (getpeername(c->fd, (struct sockaddr*)&b, &lb) == 0) {
    inet_ntop(AF_INET, &b.sin_addr, sb, sizeof(sb));
  }
  snprintf(c->desc, sizeof(c->desc), "%s:%d -> %s:%d", sa, ntohs(a.sin_port),
           sb, ntohs(b.sin_port));
}

static struct Comm* NewComm(int fd, int kind) {
  struct Comm* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->fd = fd;
  c->kind = kind;
  c->id = atomic_fetch_add(&g_next_comm_id, 1);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Describe(c);
  return c;
}

static ncclResult_t Fail(struct Comm* c, const char* what, int err) {
  if (c->error == ncclSuccess) {
    FAULTY_NET_LOG(NCCL_LOG_WARN, "%s connection %s: %s%s%s",
                   c->kind == kSend ? "send" : "receive", c->desc, what,
                   err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
  }
  c->error = ncclSystemError;
  return c->error;
}

// A free slot for the next request of `c`, or NULL when NCCL_NET_MAX_REQUESTS
// are in flight (NCCL then retries: a null request means "not now").
static struct Request* Post(struct Comm* c, int kind, void* data,
                            uint64_t size) {
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    struct Request* r = &c->req[i];
    if (r->used) continue;
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->used = 1;
    r->comm = c;
    r->seq = c->next_post++;
    r->data = data;
    r->size = size;
    if (kind == kSend) memcpy(r->header, &size, kHeaderBytes);
    return r;
  }
  return NULL;
}

static struct Request* Current(struct Comm* c) {
  if (c->next_progress == c->next_post) return NULL;
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    struct Request* r = &c->req[i];
    if (r->used && r->seq == c->next_progress) return r;
  }
  return NULL;  // unreachable: every posted seq stays used until done
}

// Sends what the socket takes of the current message(s), in order.
static ncclResult_t ProgressSend(struct Comm* c) {
  if (c->error != ncclSuccess) return c->error;
  struct Request* r;
  while ((r = Current(c)) != NULL) {
    if (FaultyNetFaultHolds(c->id, r->moved > 0, &r->not_before)) {
      return ncclSuccess;
    }
    while (r->moved < kHeaderBytes + r->size) {
      struct iovec iov[2];
      int n = 0;
      if (r->moved < kHeaderBytes) {
        iov[n].iov_base = r->header + r->moved;
        iov[n++].iov_len = kHeaderBytes - r->moved;
      }
      uint64_t data_done =
          r->moved < kHeaderBytes ? 0 : r->moved - kHeaderBytes;
      if (r->size > data_done) {
        iov[n].iov_base = r->data + data_done;
        iov[n++].iov_len = r->size - data_done;
      }
      struct msghdr msg;
      memset(&msg, 0, sizeof(msg));
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      ssize_t sent = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
        return Fail(c, "send failed", errno);
      }
      r->moved += (uint64_t)sent;
    }
    r->done = 1;
    c->next_progress++;
  }
  return ncclSuccess;
}

// Reads the current message(s) into their posted buffers, in order; never
// reads past the end of a message.
static ncclResult_t ProgressRecv(struct Comm* c) {
  if (c->error != ncclSuccess) return c->error;
  struct Request* r;
  while ((r = Current(c)) != NULL) {
    for (;;) {
      void* to;
      size_t want;
      if (r->moved < kHeaderBytes) {
        to = r->header + r->moved;
        want = kHeaderBytes - r->moved;
      } else {
        uint64_t data_done = r->moved - kHeaderBytes;
        if (data_done == r->length) break;
        to = r->data + data_done;
        want = r->length - data_done;
      }
      ssize_t got = recv(c->fd, to, want, MSG_DONTWAIT);
      if (got == 0) return Fail(c, "closed by the peer", 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
        return Fail(c, "receive failed", errno);
      }
      r->moved += (uint64_t)got;
      if (r->moved == kHeaderBytes) {
        memcpy(&r->length, r->header, kHeaderBytes);
        if (r->length > r->size) {
          char what[96];
          snprintf(what, sizeof(what),
                   "a %llu-byte message for a %llu-byte "
                   "receive",
                   (unsigned long long)r->length, (unsigned long long)r->size);
          Fail(c, what, 0);
          return c->error = ncclInternalError;
        }
      }
    }
    r->done = 1;
    c->next_progress++;
  }
  return ncclSuccess;
}

// ---- Connection set-up ----------------------------------------------------

// The handle NCCL carries from listen() to the peer's connect(). connect()
// keeps its progress in it, as NCCL's own socket net does: NCCL passes the
// same handle memory to every call of one connect.
struct Handle {
  struct sockaddr_in addr;
  uint64_t magic;
  int stage;  // 0 new, 1 connecting, 2 sending the hello
  int sent;   // hello bytes sent
  struct Comm* comm;
};
_Static_assert(sizeof(struct Handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle");

struct ListenComm {
  int fd;
  int pending;  // an accepted socket whose hello is still coming, or -1
  int got;      // hello bytes received
  unsigned char hello[sizeof(uint64_t)];
};

static struct in_addr g_addr;  // what listen() binds: the interface's address
static char g_ifname[IF_NAMESIZE] = "lo";

// The IPv4 address of the first interface that NCCL_SOCKET_IFNAME names (a
// comma-separated list of prefixes, "=name" for an exact name), else
// 127.0.0.1. An exclusion list ("^...") leaves loopback.
static void ChooseAddress(void) {
  g_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char* want = getenv("NCCL_SOCKET_IFNAME");
  if (want == NULL || *want == '\0' || *want == '^') return;
  int exact = *want == '=';
  if (exact) ++want;
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) return;
  for (struct ifaddrs* i = list; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET) continue;
    for (const char* p = want; *p != '\0';) {
      size_t len = strcspn(p, ",");
      int match = exact ? strlen(i->ifa_name) == len &&
                              strncmp(i->ifa_name, p, len) == 0
                        : len > 0 && strncmp(i->ifa_name, p, len) == 0;
      if (match) {
        g_addr = ((struct sockaddr_in*)i->ifa_addr)->sin_addr;
        snprintf(g_ifname, sizeof(g_ifname), "%s", i->ifa_name);
        freeifaddrs(list);
        return;
      }
      p += len;
      if (*p == ',') ++p;
    }
  }
  freeifaddrs(list);
  FAULTY_NET_LOG(NCCL_LOG_WARN,
                 "no IPv4 interface matches NCCL_SOCKET_IFNAME='%s'; "
                 "using 127.0.0.1",
                 getenv("NCCL_SOCKET_IFNAME"));
}

ncclResult_t FaultyNetInit(ncclDebugLogger_t log) {
  FaultyNetSetLogger(log);
  ChooseAddress();
  FaultyNetFaultInit();
  char a[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &g_addr, a, sizeof(a));
  FAULTY_NET_LOG(NCCL_LOG_INFO, "TCP over %s (%s) in pid %d", g_ifname, a,
                 (int)getpid());
  return ncclSuccess;
}

ncclResult_t FaultyNetDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t FaultyNetListen(int dev, void* opaque, void** listen_comm) {
  *listen_comm = NULL;
  if (dev != 0) return ncclInternalError;
  struct Handle* h = opaque;
  memset(h, 0, sizeof(*h));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    FAULTY_NET_LOG(NCCL_LOG_WARN, "listen: socket: %s", strerror(errno));
    return ncclSystemError;
  }
  h->addr.sin_family = AF_INET;
  h->addr.sin_addr = g_addr;
  socklen_t len = sizeof(h->addr);
  if (bind(fd, (struct sockaddr*)&h->addr, len) != 0 ||
      listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, (struct sockaddr*)&h->addr, &len) != 0) {
    FAULTY_NET_LOG(NCCL_LOG_WARN, "listen on %s: %s", g_ifname,
                   strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  struct ListenComm* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    return ncclSystemError;
  }
  l->fd = fd;
  l->pending = -1;
  h->magic = kMagic;
  *listen_comm = l;
  return ncclSuccess;
}

// Non-blocking: returns with *send_comm NULL until the socket is connected
// and the hello is out; NCCL calls again with the same handle.
ncclResult_t FaultyNetConnect(int dev, void* opaque, void** send_comm,
                              ncclNetDeviceHandle_v8_t** dev_comm) {
  *send_comm = NULL;
  if (dev_comm != NULL) *dev_comm = NULL;
  struct Handle* h = opaque;
  if (h->magic != kMagic) {
    FAULTY_NET_LOG(NCCL_LOG_WARN, "connect: the handle is not one of ours");
    return ncclInternalError;
  }
  if (h->stage == 0) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return ncclSystemError;
    if (connect(fd, (struct sockaddr*)&h->addr, sizeof(h->addr)) != 0 &&
        errno != EINPROGRESS) {
      FAULTY_NET_LOG(NCCL_LOG_WARN, "connect to port %d: %s",
                     ntohs(h->addr.sin_port), strerror(errno));
      close(fd);
      return ncclSystemError;
    }
    h->comm = NewComm(fd, kSend);
    if (h->comm == NULL) {
      close(fd);
      return ncclSystemError;
    }
    h->stage = 1;
  }
  struct Comm* c = h->comm;
  if (h->stage == 1) {
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    if (poll(&p, 1, 0) <= 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      FAULTY_NET_LOG(NCCL_LOG_WARN, "connect to port %d: %s",
                     ntohs(h->addr.sin_port), strerror(err));
      close(c->fd);
      free(c);
      h->comm = NULL;
      h->stage = 0;
      return ncclSystemError;
    }
    Describe(c);  // now that the peer is known
    h->stage = 2;
  }
  while (h->sent < (int)sizeof(kMagic)) {
    ssize_t n = send(c->fd, (const char*)&kMagic + h->sent,
                     sizeof(kMagic) - h->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n < 0) return Fail(c, "sending the hello", errno);
    h->sent += (int)n;
  }
  *send_comm = c;
  h->comm = NULL;
  h->stage = 3;
  return ncclSuccess;
}

// Non-blocking: returns with *recv_comm NULL until a peer has connected and
// its hello has come; NCCL calls again.
ncclResult_t FaultyNetAccept(void* listen_comm, void** recv_comm,
                             ncclNetDeviceHandle_v8_t** dev_comm) {
  *recv_comm = NULL;
  if (dev_comm != NULL) *dev_comm = NULL;
  struct ListenComm* l = listen_comm;
  if (l->pending < 0) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
          errno == ECONNABORTED) {
        return ncclSuccess;
      }
      FAULTY_NET_LOG(NCCL_LOG_WARN, "accept: %s", strerror(errno));
      return ncclSystemError;
    }
    l->pending = fd;
    l->got = 0;
  }
  while (l->got < (int)sizeof(l->hello)) {
    ssize_t n = recv(l->pending, l->hello + l->got, sizeof(l->hello) - l->got,
                     MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n <= 0) {
      FAULTY_NET_LOG(NCCL_LOG_WARN,
                     "accept: the peer left before its hello: %s",
                     n == 0 ? "closed" : strerror(errno));
      close(l->pending);
      l->pending = -1;
      return ncclSystemError;
    }
    l->got += (int)n;
  }
  uint64_t magic;
  memcpy(&magic, l->hello, sizeof(magic));
  int fd = l->pending;
  l->pending = -1;
  if (magic != kMagic) {
    FAULTY_NET_LOG(NCCL_LOG_WARN,
                   "accept: a connection that is not from this plugin "
                   "(hello 0x%016llx)",
                   (unsigned long long)magic);
    close(fd);
    return ncclSystemError;
  }
  struct Comm* c = NewComm(fd, kRecv);
  if (c == NULL) {
    close(fd);
    return ncclSystemError;
  }
  *recv_comm = c;
  return ncclSuccess;
}

ncclResult_t FaultyNetRegMr(void* comm, void* data, size_t size, int type,
                            void** mhandle) {
  *mhandle = NULL;
  return type == NCCL_PTR_HOST ? ncclSuccess : ncclInternalError;
}

ncclResult_t FaultyNetDeregMr(void* comm, void* mhandle) { return ncclSuccess; }

ncclResult_t FaultyNetIsend(void* send_comm, void* data, uint64_t size,
                            void** request) {
  struct Comm* c = send_comm;
  *request = NULL;
  if (c->error != ncclSuccess) return c->error;
  FaultyNetFaultOnIsend(c->id, c->desc);
  struct Request* r = Post(c, kSend, data, size);
  if (r == NULL) return ncclSuccess;
  *request = r;
  ProgressSend(c);  // a start; a failure stays in c->error for test()
  return ncclSuccess;
}

ncclResult_t FaultyNetIrecv(void* recv_comm, int n, void** data, uint64_t size,
                            void** request) {
  struct Comm* c = recv_comm;
  *request = NULL;
  if (n != 1) {
    FAULTY_NET_LOG(NCCL_LOG_WARN, "irecv of %d buffers; maxRecvs is 1", n);
    return ncclInternalError;
  }
  if (c->error != ncclSuccess) return c->error;
  struct Request* r = Post(c, kRecv, data[0], size);
  if (r == NULL) return ncclSuccess;
  *request = r;
  ProgressRecv(c);  // a start; a failure stays in c->error for test()
  return ncclSuccess;
}

ncclResult_t FaultyNetIflush(void* recv_comm, int n, void** data, int* sizes,
                             void** mhandles, void** request) {
  *request = &g_flush_request;
  return ncclSuccess;
}

// Thread safety: from the thread that drives the request's comm.
ncclResult_t FaultyNetTest(void* request, int* done, int* sizes) {
  struct Request* r = request;
  *done = 0;
  if (r == NULL) return ncclInternalError;
  if (r->kind == kFlush) {
    *done = 1;
    if (sizes != NULL) sizes[0] = 0;
    return ncclSuccess;
  }
  struct Comm* c = r->comm;
  ncclResult_t res = c->kind == kSend ? ProgressSend(c) : ProgressRecv(c);
  if (res != ncclSuccess) return res;
  if (!r->done) return ncclSuccess;
  *done = 1;
  if (sizes != NULL) sizes[0] = (int)(r->kind == kSend ? r->size : r->length);
  r->used = 0;
  return ncclSuccess;
}

ncclResult_t FaultyNetCloseComm(void* comm) {
  struct Comm* c = comm;
  if (c == NULL) return ncclSuccess;
  close(c->fd);
  free(c);
  return ncclSuccess;
}

ncclResult_t FaultyNetCloseListen(void* listen_comm) {
  struct ListenComm* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  if (l->pending >= 0) close(l->pending);
  close(l->fd);
  free(l);
  return ncclSuccess;
}

static char g_dev_name[] = "faulty";

void FaultyNetProperties(ncclNetProperties_v9_t* p) {
  memset(p, 0, sizeof(*p));
  p->name = g_dev_name;
  p->pciPath = NULL;  // no PCI device: NCCL places it under the CPU
  p->guid = 0;
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 10000;  // what NCCL's socket net assumes for lo
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 0;
  p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
}
