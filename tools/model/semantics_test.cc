#include "tools/model/semantics.h"

#include <gtest/gtest.h>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::tools {
namespace {

TEST(SemanticsTest, FunctionsAndTheirRoots) {
  EXPECT_EQ(FuncFromName("AllReduce"), Func::kAllReduce);
  EXPECT_EQ(FuncFromName("Recv"), Func::kRecv);
  EXPECT_EQ(FuncFromName(""), Func::kOther);
  EXPECT_EQ(FuncFromName("allreduce"), Func::kOther);  // NCCL's names are exact
  EXPECT_EQ(FuncFromName("AllToAllv"), Func::kOther);
  // Every rooted function, and which way its data flows.
  EXPECT_EQ(FlowOf(Func::kBroadcast), RootFlow::kFromRoot);
  EXPECT_EQ(FlowOf(Func::kScatter), RootFlow::kFromRoot);
  EXPECT_EQ(FlowOf(Func::kReduce), RootFlow::kToRoot);
  EXPECT_EQ(FlowOf(Func::kGather), RootFlow::kToRoot);
  for (Func f : {Func::kAllReduce, Func::kAllGather, Func::kReduceScatter, Func::kAllToAll, Func::kSend, Func::kRecv,
                 Func::kSendRecv, Func::kOther})
    EXPECT_FALSE(IsRooted(f)) << static_cast<int>(f);
  EXPECT_TRUE(IsRooted(Func::kGather));
  EXPECT_TRUE(IsRecv(Func::kRecv));
  EXPECT_FALSE(IsRecv(Func::kSend));
}

TEST(SemanticsTest, NcclDatatypesSpelledExactly) {
  for (const char* d : {"ncclInt8", "ncclUint8", "ncclInt32", "ncclFloat16", "ncclFloat32", "ncclFloat64",
                        "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"})
    EXPECT_TRUE(IsNcclDatatype(d)) << d;
  // What one damaged byte makes of them, and names that are no datatype.
  for (const char* d : {"ncclfloat32", "ncclFloat33", "ncclInt9", "ncclFloat8", "ncclFloat8E4M3", "float32", "RING",
                        "AllReduce", ""})
    EXPECT_FALSE(IsNcclDatatype(d)) << d;
}

TEST(SemanticsTest, DatatypeSizes) {
  EXPECT_EQ(DatatypeSize("ncclInt8"), 1);
  EXPECT_EQ(DatatypeSize("ncclUint8"), 1);
  EXPECT_EQ(DatatypeSize("ncclFloat8e4m3"), 1);
  EXPECT_EQ(DatatypeSize("ncclFloat8e5m2"), 1);
  EXPECT_EQ(DatatypeSize("ncclFloat16"), 2);
  EXPECT_EQ(DatatypeSize("ncclBfloat16"), 2);
  EXPECT_EQ(DatatypeSize("ncclInt32"), 4);
  EXPECT_EQ(DatatypeSize("ncclUint32"), 4);
  EXPECT_EQ(DatatypeSize("ncclFloat32"), 4);
  EXPECT_EQ(DatatypeSize("ncclInt64"), 8);
  EXPECT_EQ(DatatypeSize("ncclUint64"), 8);
  EXPECT_EQ(DatatypeSize("ncclFloat64"), 8);
  EXPECT_EQ(DatatypeSize("ncclFloat"), 4);
  EXPECT_EQ(DatatypeSize("Float32"), 4);
  EXPECT_EQ(DatatypeSize(""), 0);
  EXPECT_EQ(DatatypeSize("ncclComplex"), 0);
  // One table for every analysis: case and the "nccl" prefix do not matter.
  EXPECT_EQ(DatatypeSize("float16"), 2);
  EXPECT_EQ(DatatypeSize("NCCLINT64"), 8);
  EXPECT_EQ(DatatypeSize("ncclFloat8e8m0"), 1);
  EXPECT_EQ(DatatypeSize("nccl"), 0);
  EXPECT_EQ(DatatypeSize("float8"), 0);
}

TEST(SemanticsTest, BytesFollowNcclTests) {
  double b = 0;
  // AllReduce, Broadcast, Reduce, Send, Recv: count x size.
  ASSERT_TRUE(OpBytes(FuncFromName("AllReduce"), "ncclFloat32", 1024, 8, &b));
  EXPECT_EQ(b, 4096);
  ASSERT_TRUE(OpBytes(FuncFromName("Send"), "ncclBfloat16", 1024, 8, &b));
  EXPECT_EQ(b, 2048);
  // AllGather / ReduceScatter: NCCL's count is per rank; S is the whole array.
  ASSERT_TRUE(OpBytes(FuncFromName("AllGather"), "ncclFloat32", 1024, 8, &b));
  EXPECT_EQ(b, 4096 * 8);
  ASSERT_TRUE(OpBytes(FuncFromName("ReduceScatter"), "ncclFloat16", 1024, 4, &b));
  EXPECT_EQ(b, 2048 * 4);
  EXPECT_FALSE(OpBytes(FuncFromName("AllReduce"), "ncclMystery", 1024, 8, &b));

  double f = 0;
  ASSERT_TRUE(BusBwFactor(FuncFromName("AllReduce"), 8, &f));
  EXPECT_DOUBLE_EQ(f, 2.0 * 7 / 8);
  ASSERT_TRUE(BusBwFactor(FuncFromName("AllGather"), 8, &f));
  EXPECT_DOUBLE_EQ(f, 7.0 / 8);
  ASSERT_TRUE(BusBwFactor(FuncFromName("ReduceScatter"), 4, &f));
  EXPECT_DOUBLE_EQ(f, 3.0 / 4);
  ASSERT_TRUE(BusBwFactor(FuncFromName("Broadcast"), 4, &f));
  EXPECT_EQ(f, 1);
  ASSERT_TRUE(BusBwFactor(FuncFromName("Reduce"), 4, &f));
  EXPECT_EQ(f, 1);
  ASSERT_TRUE(BusBwFactor(FuncFromName("Send"), 2, &f));
  EXPECT_EQ(f, 1);
  ASSERT_TRUE(BusBwFactor(FuncFromName("Recv"), 2, &f));
  EXPECT_EQ(f, 1);
  EXPECT_FALSE(BusBwFactor(FuncFromName("AllToAllMaybe"), 2, &f));
}

// The mask bits the analyses read are NCCL's, as the plugin declares them.
static_assert(kMaskColl == nccl::kColl);
static_assert(kMaskP2p == nccl::kP2p);
static_assert(kMaskProxyOp == nccl::kProxyOp);
static_assert(kMaskProxyStep == nccl::kProxyStep);
static_assert(kMaskKernelCh == nccl::kKernelCh);
static_assert(kMaskP2pApi == nccl::kP2pApi);
static_assert(kMaskKernelLaunch == nccl::kKernelLaunch);
static_assert(kStateKernelPhaseStop == nccl::kKernelPhaseStop);

TEST(Semantics, EventMaskNamesAreNcclsAndUnknownBitsShowAsHex) {
  EXPECT_EQ(EventMaskNames(0), "none");
  EXPECT_EQ(EventMaskNames(nccl::kColl | nccl::kP2p | nccl::kKernelCh), "Coll|P2p|KernelCh");
  EXPECT_EQ(EventMaskNames(nccl::kKernelLaunch | nccl::kKernelPhase), "KernelLaunch|KernelPhase");
  EXPECT_EQ(EventMaskNames(nccl::kColl | (uint64_t{1} << 20)), "Coll|0x100000");
  EXPECT_EQ(EventMaskNames(UINT64_MAX).substr(0, 11), "Group|Coll|");
}

}  // namespace
}  // namespace ncclwatch::tools
