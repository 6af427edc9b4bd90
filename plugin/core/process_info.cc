#include "plugin/core/process_info.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cctype>

namespace ncclwatch::plugin {
namespace {

bool ParseInt(const char* s, int32_t* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (end == nullptr || *end != '\0' || v < 0 || v > (1L << 30)) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

// Looks up the current CUDA device through an already-loaded libcuda.
void ReadCudaDevice(ProcessInfo* info) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return;
  using CtxGetDevice = int (*)(int*);
  using DeviceGetPciBusId = int (*)(char*, int, int);
  using DeviceGetUuid = int (*)(unsigned char*, int);
  auto get_device = reinterpret_cast<CtxGetDevice>(dlsym(h, "cuCtxGetDevice"));
  auto get_bus = reinterpret_cast<DeviceGetPciBusId>(dlsym(h, "cuDeviceGetPCIBusId"));
  auto get_uuid = reinterpret_cast<DeviceGetUuid>(dlsym(h, "cuDeviceGetUuid_v2"));
  if (get_uuid == nullptr) get_uuid = reinterpret_cast<DeviceGetUuid>(dlsym(h, "cuDeviceGetUuid"));
  int dev = -1;
  if (get_device != nullptr && get_device(&dev) == 0 && dev >= 0) {
    info->cuda_device = dev;
    char bus[64] = {0};
    if (get_bus != nullptr && get_bus(bus, sizeof(bus) - 1, dev) == 0) info->gpu_pci_bus_id = bus;
    unsigned char u[16];
    if (get_uuid != nullptr && get_uuid(u, dev) == 0) {
      char s[64];
      snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
               u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
      info->gpu_uuid = s;
    }
  }
  dlclose(h);
}

// The NCCL and the CUDA driver of this process, through what is already
// loaded: ncclGetVersion where the process exports it (NCCL linked in, or
// libnccl loaded globally), else an already-loaded libnccl.so.2.
void ReadVersions(ProcessInfo* info) {
  using GetVersion = int (*)(int*);
  auto nccl = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  void* h = nullptr;
  if (nccl == nullptr && (h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) != nullptr)
    nccl = reinterpret_cast<GetVersion>(dlsym(h, "ncclGetVersion"));
  int code = 0;
  if (nccl != nullptr && nccl(&code) == 0 && code > 0) info->nccl_version = NcclVersionString(code);
  if (h != nullptr) dlclose(h);
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    auto driver = reinterpret_cast<GetVersion>(dlsym(cuda, "cuDriverGetVersion"));
    int v = 0;
    if (driver != nullptr && driver(&v) == 0) info->cuda_driver_version = v;
    dlclose(cuda);
  }
}

void ReadArgv(ProcessInfo* info) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = '\0';
  size_t pos = 0;
  while (pos < static_cast<size_t>(n) && info->argv.size() < 16) {
    std::string word(buf + pos);
    pos += word.size() + 1;
    if (word.size() > 256) word.resize(256);
    info->argv.push_back(word);
  }
}

}  // namespace

std::string SafeName(const std::string& s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) || c == '-' || c == '.' || c == '_') ? c : '_';
  }
  if (out.empty()) out = "host";
  return out;
}

std::string NcclVersionString(int code) {
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int rest = code >= 10000 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

ProcessInfo ReadProcessInfo() {
  ProcessInfo info;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) info.hostname = host;
  info.pid = getpid();
  const char* rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK"};
  for (const char* v : rank_vars) {
    if (ParseInt(getenv(v), &info.launcher_rank)) {
      info.launcher_rank_source = v;
      break;
    }
  }
  const char* size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"};
  for (const char* v : size_vars)
    if (ParseInt(getenv(v), &info.launcher_world_size)) break;
  const char* local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
  for (const char* v : local_vars)
    if (ParseInt(getenv(v), &info.launcher_local_rank)) break;
  if (const char* v = getenv("CUDA_VISIBLE_DEVICES")) info.cuda_visible_devices = v;
  const char* job_vars[] = {"NCCLWATCH_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"};
  for (const char* v : job_vars) {
    const char* s = getenv(v);
    if (s != nullptr && *s != '\0') {
      info.job_id = s;
      break;
    }
  }
  ReadCudaDevice(&info);
  ReadVersions(&info);
  ReadArgv(&info);
  return info;
}

}  // namespace ncclwatch::plugin
