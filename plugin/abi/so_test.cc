// The built plugin's ELF dynamic section: what it needs and what it exports,
// and (in the release link, NCCLWATCH_PORTABLE_SO) that it loads on glibc
// 2.17. Parsed with <elf.h> from the file itself (no external tools).

#include <elf.h>
#include <string.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/abi/profiler_v6.h"
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
  std::vector<char> Bytes(const Elf64_Shdr* s) const {
    if (s == nullptr || s->sh_offset + s->sh_size > data_.size()) return {};
    return std::vector<char>(data_.data() + s->sh_offset, data_.data() + s->sh_offset + s->sh_size);
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
  // The loader's name is the architecture's.
  std::set<std::string> allowed = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
#if defined(__aarch64__)
                                   "ld-linux-aarch64.so.1"};
#else
                                   "ld-linux-x86-64.so.2"};
#endif
#if !NCCLWATCH_PORTABLE_SO
  // Sanitizer builds link the C++ runtime dynamically (plugin/BUILD).
  allowed.insert({"libstdc++.so.6", "libgcc_s.so.1"});
#endif
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
                                      "ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6",
                                      "ncclProfiler_v7"};
  EXPECT_EQ(exported, want);
}

#if NCCLWATCH_PORTABLE_SO
// A glibc version "2.17" as {2, 17, 0}; {} if `s` is not one.
std::vector<int> GlibcVersion(const std::string& name) {
  const std::string prefix = "GLIBC_";
  if (name.rfind(prefix, 0) != 0) return {};
  std::vector<int> v;
  std::istringstream in(name.substr(prefix.size()));
  std::string part;
  while (std::getline(in, part, '.')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return {};
    v.push_back(std::stoi(part));
  }
  while (v.size() < 3) v.push_back(0);
  return v;
}

TEST(GlibcVersionTest, ParsesVersionNames) {
  EXPECT_EQ(GlibcVersion("GLIBC_2.17"), (std::vector<int>{2, 17, 0}));
  EXPECT_EQ(GlibcVersion("GLIBC_2.2.5"), (std::vector<int>{2, 2, 5}));
  EXPECT_TRUE(GlibcVersion("GLIBCXX_3.4.29").empty());
  EXPECT_TRUE(GlibcVersion("GLIBC_PRIVATE").empty());
  EXPECT_LT(GlibcVersion("GLIBC_2.3.4"), GlibcVersion("GLIBC_2.17"));
  EXPECT_GT(GlibcVersion("GLIBC_2.34"), GlibcVersion("GLIBC_2.17"));
}

// The release .so loads on glibc 2.17 and later (RHEL/Rocky 8 have 2.28,
// Ubuntu 20.04 2.31): every version it needs is a GLIBC_ one no newer than
// 2.17 (no GLIBCXX_, CXXABI_ or GCC_: libstdc++ and libgcc are inside), and
// each function glibc 2.17 kept in libpthread.so.0 or libdl.so.2 is needed
// from there (glibc 2.34 and later find the same versions in libc.so.6).
TEST_F(SoTest, LoadsOnGlibc217) {
  auto verneeds = elf_->Sections(SHT_GNU_verneed);
  ASSERT_EQ(verneeds.size(), 1u);
  const Elf64_Shdr* vn = verneeds[0];
  const Elf64_Shdr* strtab = elf_->Section(vn->sh_link);
  const std::vector<char> raw = elf_->Bytes(vn);
  ASSERT_FALSE(raw.empty());
  // Version index -> (file, version name).
  std::map<uint16_t, std::pair<std::string, std::string>> versions;
  size_t off = 0;
  for (uint32_t i = 0; i < vn->sh_info; ++i) {
    ASSERT_LE(off + sizeof(Elf64_Verneed), raw.size());
    Elf64_Verneed need;
    memcpy(&need, raw.data() + off, sizeof(need));
    const std::string file = elf_->Str(strtab, need.vn_file);
    size_t aux_off = off + need.vn_aux;
    for (uint16_t j = 0; j < need.vn_cnt; ++j) {
      ASSERT_LE(aux_off + sizeof(Elf64_Vernaux), raw.size());
      Elf64_Vernaux aux;
      memcpy(&aux, raw.data() + aux_off, sizeof(aux));
      const std::string name = elf_->Str(strtab, aux.vna_name);
      versions[aux.vna_other] = {file, name};
      const std::vector<int> v = GlibcVersion(name);
      EXPECT_FALSE(v.empty()) << file << " " << name << ": not a glibc version";
      EXPECT_LE(v, (std::vector<int>{2, 17, 0})) << file << " " << name << ": newer than glibc 2.17";
      aux_off += aux.vna_next;
      if (aux.vna_next == 0) break;
    }
    off += need.vn_next;
    if (need.vn_next == 0) break;
  }
  EXPECT_FALSE(versions.empty());

  auto dynsyms = elf_->Sections(SHT_DYNSYM);
  auto versyms = elf_->Sections(SHT_GNU_versym);
  ASSERT_EQ(dynsyms.size(), 1u);
  ASSERT_EQ(versyms.size(), 1u);
  const Elf64_Shdr* symstr = elf_->Section(dynsyms[0]->sh_link);
  const auto syms = elf_->Entries<Elf64_Sym>(dynsyms[0]);
  const auto vers = elf_->Entries<Elf64_Versym>(versyms[0]);
  ASSERT_EQ(syms.size(), vers.size());
  int moved = 0;
  for (size_t i = 1; i < syms.size(); ++i) {
    if (syms[i].st_shndx != SHN_UNDEF) continue;
    const std::string name = elf_->Str(symstr, syms[i].st_name);
    const uint16_t ndx = vers[i] & 0x7fff;
    if (ndx <= VER_NDX_GLOBAL) {
      // Unversioned imports are weak hooks (__gmon_start__, _ITM_*) that
      // may stay unresolved.
      EXPECT_EQ(ELF64_ST_BIND(syms[i].st_info), STB_WEAK) << name << ": an unversioned strong import";
      continue;
    }
    ASSERT_EQ(versions.count(ndx), 1u) << name;
    const std::string& file = versions[ndx].first;
    const bool pthread = name.rfind("pthread_", 0) == 0 || name == "__pthread_key_create";
    const bool dl = name == "dlopen" || name == "dlsym" || name == "dlclose" || name == "dlerror";
    if (pthread) {
      EXPECT_EQ(file, "libpthread.so.0") << name;
    }
    if (dl) {
      EXPECT_EQ(file, "libdl.so.2") << name;
    }
    moved += pthread || dl;
  }
  EXPECT_GT(moved, 0) << "the writer thread's pthread_create at least";
}
#endif  // NCCLWATCH_PORTABLE_SO

// dlopen finds every table, each named "ncclwatch" with all entry points set.
TEST_F(SoTest, TablesResolve) {
  PluginLib* lib = PluginLib::Shared();
  ASSERT_NE(lib->handle(), nullptr);
  for (int v = 1; v <= 7; ++v) {
    auto* t = static_cast<const nccl::ProfilerV6*>(lib->Table(v));  // same shape in every version
    ASSERT_NE(t, nullptr) << "ncclProfiler_v" << v;
    EXPECT_STREQ(t->name, "ncclwatch");
    EXPECT_NE(reinterpret_cast<const void*>(t->init), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->startEvent), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->stopEvent), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->recordEventState), nullptr);
    EXPECT_NE(reinterpret_cast<const void*>(t->finalize), nullptr);
  }
  EXPECT_EQ(lib->Table(8), nullptr);
}

}  // namespace
}  // namespace ncclwatch::testing
