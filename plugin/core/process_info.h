// What the process header says about the process: host, pid, the launcher's
// rank variables, the GPU. Read once, on the cold path (first init).
//
// The GPU is found without linking CUDA: if the host process has already
// loaded libcuda (it has, by the time NCCL creates a communicator), its
// driver API is looked up with dlopen(RTLD_NOLOAD) and asked for the current
// context's device, PCI bus id and UUID. Otherwise only the environment
// (CUDA_VISIBLE_DEVICES, LOCAL_RANK) is recorded.

#ifndef PLUGIN_CORE_PROCESS_INFO_H_
#define PLUGIN_CORE_PROCESS_INFO_H_

#include <stdint.h>

#include <string>
#include <vector>

namespace ncclwatch::plugin {

struct ProcessInfo {
  std::string hostname;
  int64_t pid = 0;
  int32_t launcher_rank = -1;
  int32_t launcher_world_size = -1;
  int32_t launcher_local_rank = -1;
  std::string launcher_rank_source;
  int32_t cuda_device = -1;
  std::string cuda_visible_devices;
  std::string gpu_pci_bus_id;
  std::string gpu_uuid;
  std::string job_id;
  std::vector<std::string> argv;
  std::string nccl_version;     // "2.28.9"; "" when not found
  int32_t cuda_driver_version = 0;  // cuDriverGetVersion; 0 when no driver is loaded
};

// "2.28.9" for NCCL's version code 22809 (and 2.8.4 for 2804: codes before
// 2.9 had two digits per part).
std::string NcclVersionString(int code);

ProcessInfo ReadProcessInfo();

// File-name-safe host name (letters, digits, '-', '.', '_').
std::string SafeName(const std::string& s);

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_PROCESS_INFO_H_
