// The built plugin's ELF dynamic section: what it needs and what it exports.
// Parsed with <elf.h> from the file itself (no external tools).

#include <elf.h>
#include <string.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/testing/fake_nccl_host.h"

namespace ncclwatch::testing {
namespace {

class ElfFile {
 public:
  explicit ElfFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    data_ = ss.str();
  }
  bool Valid(std::string* why) const {
    if (data_.size() < sizeof(Elf64_Ehdr)) return *why = "too small", false;
    const auto* eh = Ehdr();
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return *why = "not ELF", false;
    if (eh->e_ident[EI_CLASS] != ELFCLASS64) return *why = "not ELF64", false;
    if (eh->e_type != ET_DYN) return *why = "not a shared object", false;
    if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > data_.size())
      return *why = "bad section headers", false;
    return true;
  }
  const Elf64_Ehdr* Ehdr() const { return reinterpret_cast<const Elf64_Ehdr*>(data_.data()); }
  std::vector<const Elf64_Shdr*> Sections(uint32_t type) const {
    std::vector<const Elf64_Shdr*> out;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(data_.data() + Ehdr()->e_shoff);
    for (int i = 0; i < Ehdr()->e_shnum; ++i)
      if (sh[i].sh_type == type) out.push_back(&sh[i]);
    return out;
  }
  const Elf64_Shdr* Section(uint32_t index) const {
    if (index >= Ehdr()->e_shnum) return nullptr;
    return reinterpret_cast<const Elf64_Shdr*>(data_.data() + Ehdr()->e_shoff) + index;
  }
  template <typename T>
  std::vector<T> Entries(const Elf64_Shdr* s) const {
    std::vector<T> out;
    if (s == nullptr || s->sh_offset + s->sh_size > data_.size()) return out;
    const size_t n = s->sh_size / sizeof(T);
    out.resize(n);
    memcpy(out.data(), data_.data() + s->sh_offset, n * sizeof(T));
    return out;
  }
  std::string Str(const Elf64_Shdr* strtab, uint64_t off) const {
    if (strtab == nullptr || off >= strtab->sh_size || strtab->sh_offset + strtab->sh_size > data_.size())
      return "<bad string>";
    const char* p = data_.data() + strtab->sh_offset + off;
    return std::string(p, strnlen(p, strtab->sh_size - off));
  }

 private:
  std::string data_;
};

class SoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    elf_ = std::make_unique<ElfFile>(PluginPath());
    std::string why;
    ASSERT_TRUE(elf_->Valid(&why)) << PluginPath() << ": " << why;
  }
  std::unique_ptr<ElfFile> elf_;
};

TEST_F(SoTest, NeedsOnlySystemLibraries) {
  auto dyns = elf_->Sections(SHT_DYNAMIC);
  ASSERT_EQ(dyns.size(), 1u);
  const Elf64_Shdr* strtab = elf_->Section(dyns[0]->sh_link);
  std::vector<std::string> needed;
  bool bind_now = false;
  bool nodelete = false;
  for (const Elf64_Dyn& d : elf_->Entries<Elf64_Dyn>(dyns[0])) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_NEEDED) needed.push_back(elf_->Str(strtab, d.d_un.d_val));
    if (d.d_tag == DT_FLAGS && (d.d_un.d_val & DF_BIND_NOW)) bind_now = true;
    if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_NOW)) bind_now = true;
    if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_NODELETE)) nodelete = true;
    EXPECT_NE(d.d_tag, DT_RPATH) << "no RPATH";
    EXPECT_NE(d.d_tag, DT_RUNPATH) << "no RUNPATH";
  }
  const std::set<std::string> allowed = {"libc.so.6",       "libstdc++.so.6", "libgcc_s.so.1",
                                         "libm.so.6",       "libpthread.so.0", "libdl.so.2",
                                         "ld-linux-x86-64.so.2"};
  EXPECT_FALSE(needed.empty());
  for (const std::string& n : needed) EXPECT_EQ(allowed.count(n), 1u) << "unexpected NEEDED " << n;
  EXPECT_TRUE(bind_now) << "linked with -z now";
  // NCCL 2.23 to 2.26 dlclose the plugin after the last finalize.
  EXPECT_TRUE(nodelete) << "linked with -z nodelete";
}

TEST_F(SoTest, ExportsExactlyTheProfilerTables) {
  auto dynsyms = elf_->Sections(SHT_DYNSYM);
  ASSERT_EQ(dynsyms.size(), 1u);
  const Elf64_Shdr* strtab = elf_->Section(dynsyms[0]->sh_link);
  std::set<std::string> exported;
  for (const Elf64_Sym& s : elf_->Entries<Elf64_Sym>(dynsyms[0])) {
    if (s.st_shndx == SHN_UNDEF) continue;  // imports
    const int bind = ELF64_ST_BIND(s.st_info);
    if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
    if (ELF64_ST_VISIBILITY(s.st_other) != STV_DEFAULT) continue;
    const std::string name = elf_->Str(strtab, s.st_name);
    exported.insert(name);
    if (name.rfind("ncclProfiler_v", 0) == 0) {
      EXPECT_EQ(ELF64_ST_TYPE(s.st_info), STT_OBJECT) << name;
      EXPECT_GE(s.st_size, 48u) << name << ": six pointers (sanitizers add redzones)";
    }
  }
  const std::set<std::string> want = {"ncclProfiler_v1", "ncclProfiler_v2", "ncclProfiler_v3",
                                      "ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"};
  EXPECT_EQ(exported, want);
}

// dlopen finds every table, each named "ncclwatch" with all entry points set.
TEST_F(SoTest, TablesResolve) {
  PluginLib* lib = PluginLib::Shared();
  ASSERT_NE(lib->handle(), nullptr);
  for (int v = 1; v <= 6; ++v) {
    auto* t = static_cast<const nccl::ProfilerV6*>(lib->Table(v));  // same shape in every version
    ASSERT_NE(t, nullptr) << "ncclProfiler_v" << v;
    EXPECT_STREQ(t->name, "ncclwatch");
    EXPECT_NE(reinterpret_cast<const void*>(t->init), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->startEvent), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->stopEvent), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->recordEventState), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->finalize), nullptr);
  }
  EXPECT_EQ(lib->Table(7), nullptr);
}

}  // namespace
}  // namespace ncclwatch::testing
