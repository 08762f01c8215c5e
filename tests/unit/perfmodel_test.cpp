// The performance model: GPU catalogue and cluster resolution, op timing against hand-computed
// values, stream clocks, overlap and the pipeline schedule.
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace perf = cotune::core::perf;
using cotune::core::UserError;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

cotune_hardware resolve(const json& cluster) {
  cotune_hardware hw{};
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node);
  perf::resolve_hardware(cluster, &hw);
  return hw;
}

std::string error_of(const json& cluster) {
  try {
    resolve(cluster);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A round-number machine: 100 TFLOP/s, 1 TB/s, 100 GB/s links, no latency, every efficiency 0.5
// for GEMMs with no size penalty, 1.0 elsewhere.
cotune_hardware toy() {
  cotune_hardware hw{};
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node);
  hw.gpu_name = cotune_str{"toy", 3};
  hw.peak_flops[COTUNE_DTYPE_BF16] = 100e12;
  hw.hbm_bytes = 80e9;
  hw.hbm_bytes_per_s = 1e12;
  for (int l = 0; l < COTUNE_NET_LEVELS; ++l) hw.net_bytes_per_s[l] = 100e9;
  hw.gpus_per_node = 8;
  hw.nodes = 1;
  hw.gemm_efficiency_max = 0.5;
  hw.gemm_half_efficiency_flops = 0;
  hw.memory_efficiency = 1;
  hw.network_efficiency = 1;
  return hw;
}

cotune_op op(int32_t kind, int32_t phase) {
  cotune_op o{};
  o.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
  o.kind = kind;
  o.phase = phase;
  o.depends_on = -1;
  o.dtype = COTUNE_DTYPE_BF16;
  o.count = 1;
  return o;
}

cotune_op gemm(int32_t phase, double m, double n, double k) {
  cotune_op o = op(COTUNE_OP_GEMM, phase);
  o.m = m, o.n = n, o.k = k;
  return o;
}

cotune_op coll(int32_t phase, int32_t c, double bytes, double n, int32_t stream, int32_t group) {
  cotune_op o = op(COTUNE_OP_COLLECTIVE, phase);
  o.collective = c, o.bytes = bytes, o.group_size = n, o.stream = stream, o.group = group;
  o.net_level = COTUNE_NET_NODE;
  return o;
}

cotune_trace trace_of(const std::vector<cotune_op>& ops, const cotune_hardware& hw) {
  cotune_trace t{};
  t.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
  t.ops = ops.data();
  t.num_ops = ops.size();
  t.op_stride = sizeof(cotune_op);
  t.schedule = COTUNE_SCHEDULE_1F1B;
  t.pipeline_stages = 1;
  t.virtual_stages = 1;
  t.micro_batches = 1;
  t.gpus = 8;
  t.memory.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
  t.hardware = hw;
  return t;
}

cotune_sim_result run(const cotune_trace& t) {
  cotune_sim_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens);
  perf::simulate(t, &r);
  return r;
}

}  // namespace

TEST(Catalogue, HasTheGpusTheIssueNames) {
  auto names = perf::catalogue_gpu_names();
  for (const char* g : {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x"})
    EXPECT_THAT(names, ::testing::Contains(g));
}

TEST(Catalogue, ResolvesA100Selene) {
  cotune_hardware hw = resolve({{"gpu", "a100-80gb"}, {"nodes", 4}});
  EXPECT_EQ(std::string(hw.gpu_name.data, hw.gpu_name.len), "a100-80gb");
  EXPECT_DOUBLE_EQ(hw.peak_flops[COTUNE_DTYPE_BF16], 312e12);
  EXPECT_DOUBLE_EQ(hw.peak_flops[COTUNE_DTYPE_FP8], 0);
  EXPECT_DOUBLE_EQ(hw.hbm_bytes, 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(hw.net_bytes_per_s[COTUNE_NET_NODE], 300e9);
  EXPECT_DOUBLE_EQ(hw.net_bytes_per_s[COTUNE_NET_CLUSTER], 25e9);  // 8 x 200 Gb/s per node
  EXPECT_EQ(hw.gpus_per_node, 8);
  EXPECT_EQ(hw.nodes, 4);
  EXPECT_EQ(hw.price_per_gpu_hour, 0);
}

// The memory the driver reports, not the marketed GB read as decimal: nvidia-smi totals 81,559 MiB
// on an H100, 143,771 on an H200, 183,359 on a B200 and 189,471 on a GB200 (their 80GB, 141GB,
// 180GB and 186GB).
TEST(Catalogue, GpuMemoryIsTheDriversTotal) {
  const double mib = 1048576.0;
  EXPECT_NEAR(resolve({{"gpu", "h100-sxm"}, {"nodes", 1}}).hbm_bytes, 81559 * mib, 0.1 * 1073741824.0);
  EXPECT_NEAR(resolve({{"gpu", "h200"}, {"nodes", 1}}).hbm_bytes, 143771 * mib, 0.1 * 1073741824.0);
  EXPECT_NEAR(resolve({{"gpu", "b200"}, {"nodes", 1}}).hbm_bytes, 183359 * mib, 0.1 * 1073741824.0);
  EXPECT_NEAR(resolve({{"gpu", "gb200"}, {"nodes", 1}}).hbm_bytes, 189471 * mib, 0.1 * 1073741824.0);
}

TEST(Catalogue, ResolvesOtherSpellingsOfAName) {
  EXPECT_EQ(perf::catalogue_gpu_name("A100_80GB"), "a100-80gb");
  EXPECT_EQ(perf::catalogue_gpu_name("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(perf::catalogue_gpu_name("a100-sxm4-40gb"), "a100-40gb");
  EXPECT_EQ(perf::catalogue_gpu_name("GB200-NVL72"), "gb200");
  EXPECT_EQ(perf::catalogue_gpu_name("tpu-v9"), "");
  // Every alias names an entry of the catalogue.
  for (const char* g : {"a100", "h100", "h200-sxm", "dgx-b200", "b300-sxm", "gb300-nvl72", "mi300"})
    EXPECT_THAT(perf::catalogue_gpu_names(), ::testing::Contains(perf::catalogue_gpu_name(g))) << g;
  // The resolved hardware carries the catalogue name, and a calibration keyed by any spelling applies.
  cotune_hardware hw = resolve({{"gpu", "h100_80gb"}, {"nodes", 1}, {"calibration", {{"H100", {{"hbm_gib", 70}}}}}});
  EXPECT_EQ(std::string(hw.gpu_name.data, hw.gpu_name.len), "h100-sxm");
  EXPECT_DOUBLE_EQ(hw.hbm_bytes, 70.0 * 1073741824.0);
  // A file's path where its constants belong says where the path goes.
  try {
    resolve({{"gpu", "h100-sxm"}, {"nodes", 1}, {"calibration", "CAL.json"}});
    ADD_FAILURE() << "a path was taken for constants";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("/calibration: expected an object of constants per GPU type, got "
                                               "\"CAL.json\" (a calibration file's path goes in the study file's "
                                               "top-level \"calibration\""));
  }
}

TEST(Catalogue, OverridesNetworkPriceAndSpecFields) {
  cotune_hardware hw = resolve({{"gpu", "h100-sxm"},
                                {"nodes", 2},
                                {"gpus_per_node", 4},
                                {"nodes_per_island", 1},
                                {"price_per_gpu_hour", 2.5},
                                {"network", {{"cluster", {{"bandwidth_GBps", 12.5}, {"latency_us", 10}}}}},
                                {"gpu_spec", {{"hbm_gib", 94}}}});
  EXPECT_DOUBLE_EQ(hw.net_bytes_per_s[COTUNE_NET_CLUSTER], 12.5e9);
  EXPECT_DOUBLE_EQ(hw.net_latency_s[COTUNE_NET_CLUSTER], 10e-6);
  EXPECT_DOUBLE_EQ(hw.hbm_bytes, 94.0 * 1073741824.0);
  EXPECT_EQ(hw.gpus_per_node, 4);
  EXPECT_EQ(hw.nodes_per_island, 1);
  EXPECT_DOUBLE_EQ(hw.price_per_gpu_hour, 2.5);
}

TEST(Catalogue, ExponentialThroughputComesWithTheAbi15Struct) {
  cotune_hardware hw{};
  hw.struct_size = sizeof hw;
  perf::resolve_hardware({{"gpu", "b200"}, {"nodes", 1}}, &hw);
  EXPECT_DOUBLE_EQ(hw.exp_per_s, 5e12);
  perf::resolve_hardware({{"gpu", "b300"}, {"nodes", 1}}, &hw);
  EXPECT_DOUBLE_EQ(hw.exp_per_s, 10.7e12);  // Blackwell Ultra doubles the special-function units
  perf::resolve_hardware({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"exp_tera_per_s", 2}}}}, &hw);
  EXPECT_DOUBLE_EQ(hw.exp_per_s, 2e12);
  // A 1.4 reader's struct ends before the field: nothing is written past it.
  cotune_hardware old{};
  old.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, net_efficiency);
  old.exp_per_s = -1;
  perf::resolve_hardware({{"gpu", "b200"}, {"nodes", 1}}, &old);
  EXPECT_EQ(old.exp_per_s, -1);
  EXPECT_THAT(error_of({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"exp_tera_per_s", "fast"}}}}),
              HasSubstr("gpu_spec/exp_tera_per_s: expected a number"));
}

TEST(Catalogue, GroupedGemmEfficiencyComesWithTheAbi18Struct) {
  cotune_hardware hw{};
  hw.struct_size = sizeof hw;
  perf::resolve_hardware({{"gpu", "b200"}, {"nodes", 1}}, &hw);
  EXPECT_EQ(hw.grouped_gemm_efficiency, 0);  // the catalogue leaves it out: as efficient as dense GEMMs
  perf::resolve_hardware({{"gpu", "h100"}, {"nodes", 1}}, &hw);
  EXPECT_DOUBLE_EQ(hw.grouped_gemm_efficiency, 0.55);  // Hopper's grouped GEMMs (gpus.json)
  perf::resolve_hardware({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"grouped_gemm_efficiency", 0.7}}}}, &hw);
  EXPECT_DOUBLE_EQ(hw.grouped_gemm_efficiency, 0.7);
  // A 1.7 reader's struct ends before the field: nothing is written past it.
  cotune_hardware old{};
  old.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, exp_per_s);
  old.grouped_gemm_efficiency = -1;
  perf::resolve_hardware({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"grouped_gemm_efficiency", 0.7}}}}, &old);
  EXPECT_EQ(old.grouped_gemm_efficiency, -1);
  EXPECT_THAT(error_of({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"grouped_gemm_efficiency", 0}}}}),
              HasSubstr("gpu_spec/grouped_gemm_efficiency: 0 is out of range"));
}

TEST(Catalogue, DefinesACustomGpu) {
  json spec = {{"name", "my-accel"}, {"peak_tflops", {{"bf16", 500}}}, {"hbm_gib", 64}, {"hbm_GBps", 2000},
               {"nvlink_GBps", 200}, {"network_GBps", 25}, {"latency_us", {{"node", 2}, {"cluster", 5}}},
               {"kernel_launch_us", 3}, {"gemm_efficiency_max", 0.7}, {"gemm_half_efficiency_gflops", 1},
               {"memory_efficiency", 0.8}, {"network_efficiency", 0.8}};
  cotune_hardware hw = resolve({{"gpu_spec", spec}, {"nodes", 1}});
  EXPECT_EQ(std::string(hw.gpu_name.data, hw.gpu_name.len), "my-accel");
  EXPECT_DOUBLE_EQ(hw.peak_flops[COTUNE_DTYPE_FP16], 500e12);  // fp16 defaults to the bf16 peak
  EXPECT_DOUBLE_EQ(hw.net_bytes_per_s[COTUNE_NET_ISLAND], 25e9 / 4);
}

TEST(Catalogue, RejectsBadClustersNamingTheField) {
  EXPECT_THAT(error_of({{"gpu", "tpu-v9"}, {"nodes", 1}}), HasSubstr("/cluster/gpu: unknown GPU 'tpu-v9' (the catalogue"));
  EXPECT_THAT(error_of({{"gpu", "gb20"}, {"nodes", 1}}), HasSubstr("unknown GPU 'gb20' (did you mean \"gb200\"?)"));
  // An alias is a name too: "h100" (the h100-sxm) is one letter away, "h200" two.
  EXPECT_THAT(error_of({{"gpu", "h100x"}, {"nodes", 1}}), HasSubstr("unknown GPU 'h100x' (did you mean \"h100\"?)"));
  EXPECT_THAT(error_of({{"gpu", "h100"}, {"nodes", 1}, {"gpu_spec", {{"hbm_gb", 80}}}}),
              HasSubstr("gpu_spec/hbm_gb: unknown GPU field (did you mean \"hbm_gib\"?)"));
  EXPECT_THAT(error_of({{"gpu", "h100-sxm"}}), HasSubstr("/cluster/nodes: missing"));
  EXPECT_THAT(error_of({{"gpu", "h100-sxm"}, {"nodes", 0}}), HasSubstr("/cluster/nodes"));
  EXPECT_THAT(error_of({{"gpu", "h100-sxm"}, {"nodes", 1}, {"gpus", 8}}), HasSubstr("/cluster/gpus: unknown cluster field"));
  EXPECT_THAT(error_of({{"gpu", "h100-sxm"}, {"nodes", 1}, {"network", {{"rack", {}}}}}),
              HasSubstr("/cluster/network/rack: unknown network level"));
  EXPECT_THAT(error_of({{"gpu_spec", {{"name", "x"}, {"hbm_gib", 10}}}, {"nodes", 1}}),
              HasSubstr("incomplete; missing peak_tflops.bf16"));
  EXPECT_THAT(error_of({{"gpu", "h100-sxm"}, {"nodes", 1}, {"gpu_spec", {{"hbm_gib", "big"}}}}),
              HasSubstr("/cluster/gpu_spec/hbm_gib: expected a number"));
}

TEST(OpTime, GemmIsComputeBoundAtTheEfficiency) {
  cotune_hardware hw = toy();
  // 2 * 1000^3 FLOPs at 100 TFLOP/s x 0.5 = 40 us; the 6 MB of operands take only 6 us.
  EXPECT_NEAR(perf::op_time(gemm(0, 1000, 1000, 1000), hw), 40e-6, 1e-12);
}

TEST(OpTime, SkinnyGemmIsMemoryBound) {
  cotune_hardware hw = toy();
  // m = 1: 2e6 FLOPs (0.04 us) but (1000 + 1e6 + 1000) x 2 bytes at 1 TB/s = 2.004 us.
  EXPECT_NEAR(perf::op_time(gemm(0, 1, 1000, 1000), hw), 2.004e-6, 1e-12);
}

TEST(OpTime, SmallGemmsLoseEfficiencyAndPayLaunches) {
  cotune_hardware hw = toy();
  hw.gemm_half_efficiency_flops = 2e9;  // a 1000^3 GEMM reaches half of 0.5
  hw.kernel_launch_s = 5e-6;
  EXPECT_NEAR(perf::op_time(gemm(0, 1000, 1000, 1000), hw), 80e-6 + 5e-6, 1e-12);
}

TEST(OpTime, AttentionCausalAndBackward) {
  cotune_hardware hw = toy();
  cotune_op a = op(COTUNE_OP_ATTENTION, COTUNE_PHASE_FORWARD);
  a.batch = 1, a.heads = 8, a.seq_q = 1024, a.seq_kv = 1024, a.head_dim = 128;
  const double flops = 4.0 * 8 * 1024 * 1024 * 128;  // 4.29e9
  EXPECT_NEAR(perf::op_time(a, hw), flops / (100e12 * 0.5 * 0.8), 1e-12);
  a.flags = COTUNE_OP_CAUSAL;
  EXPECT_NEAR(perf::op_time(a, hw), flops / 2 / (100e12 * 0.5 * 0.8), 1e-12);
  a.phase = COTUNE_PHASE_BACKWARD;  // five products against two, at 0.8 of the forward's rate
  EXPECT_NEAR(perf::op_time(a, hw), 2.5 * flops / 2 / (100e12 * 0.5 * 0.8 * 0.8), 1e-12);
  a.flags |= COTUNE_OP_RECOMPUTE;  // a forward rerun inside backward
  EXPECT_NEAR(perf::op_time(a, hw), flops / 2 / (100e12 * 0.5 * 0.8), 1e-12);
}

TEST(OpTime, AttentionSlowsAtSmallHeadDimsBoundByExponentials) {
  // The toy's attention runs at 0.4 x 100 TFLOP/s = 40 TFLOP/s. With 1e11 exponentials per second,
  // a score at head dim 128 (512 FLOPs forward) takes 12.8 ps of tensor work at that rate, of which
  // the exponential is 10 ps: share s = 40e12 / (512 x 1e11) = 0.78125. Head dim 64 halves the
  // tensor part only: time per score (1 - s) x 64/128 + s of the 128-dim one, i.e. rate
  // 1 / ((1 - s) + s x 2).
  cotune_hardware hw = toy();
  hw.struct_size = sizeof hw;
  cotune_op a = op(COTUNE_OP_ATTENTION, COTUNE_PHASE_FORWARD);
  a.batch = 1, a.heads = 8, a.seq_q = 1024, a.seq_kv = 1024, a.head_dim = 128;
  const double rate = 100e12 * 0.5 * 0.8;
  const double scores = 8.0 * 1024 * 1024;
  EXPECT_NEAR(perf::op_time(a, hw), 512 * scores / rate, 1e-12);  // no exp_per_s: as before
  hw.exp_per_s = 1e11;
  EXPECT_NEAR(perf::op_time(a, hw), 512 * scores / rate, 1e-12);  // the reference head dim: unchanged
  a.head_dim = 64;
  const double s = rate / (512 * 1e11);
  EXPECT_NEAR(perf::op_time(a, hw), 256 * scores / (rate / ((1 - s) + s * 2)), 1e-12);
  EXPECT_NEAR(perf::op_time(a, hw) / (512 * scores / rate), (1 - s) / 2 + s, 1e-9);  // 0.89: mostly exponentials
  // Backward: 1280 FLOPs per score at 0.8 of the rate and one exponential, so a smaller share.
  a.phase = COTUNE_PHASE_BACKWARD;
  const double sb = 0.8 * rate / (1280 * 1e11);
  EXPECT_NEAR(perf::op_time(a, hw), 2.5 * 256 * scores / (0.8 * rate / ((1 - sb) + sb * 2)), 1e-12);
  // A larger head dim runs faster than the reference rate.
  a.phase = COTUNE_PHASE_FORWARD;
  a.head_dim = 256;
  EXPECT_LT(perf::op_time(a, hw), 1024 * scores / rate);
}

TEST(OpTime, GroupedGemmsRunAtTheirOwnShareOfTheDenseEfficiency) {
  // One group of a grouped GEMM, 2 x 1000^3 FLOPs: 40 us at the toy's 0.5 of 100 TFLOP/s (as a dense
  // GEMM). At grouped_gemm_efficiency 0.8 it reaches 0.4 of the peak: 50 us.
  cotune_hardware hw = toy();
  hw.struct_size = sizeof hw;
  cotune_op g = gemm(0, 1000, 1000, 1000);
  g.flags = COTUNE_OP_GROUPED;
  EXPECT_NEAR(perf::op_time(g, hw), 40e-6, 1e-12);  // 0: as a dense GEMM
  hw.grouped_gemm_efficiency = 0.8;
  EXPECT_NEAR(perf::op_time(g, hw), 50e-6, 1e-12);
  EXPECT_NEAR(perf::op_time(gemm(0, 1000, 1000, 1000), hw), 40e-6, 1e-12);  // dense GEMMs keep theirs
  // Above 1 (a grouped kernel filling the GPU with many small groups' tiles) it may lift a group
  // past its size's efficiency, never past 0.95 of the peak: 2e9 / (0.95 x 100e12).
  hw.grouped_gemm_efficiency = 3;
  EXPECT_NEAR(perf::op_time(g, hw), 2e9 / (0.95 * 100e12), 1e-12);
  // A 1.7 plugin's struct ends before the field: the host reads 0, as efficient as dense GEMMs.
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, exp_per_s);
  EXPECT_NEAR(perf::op_time(g, hw), 40e-6, 1e-12);
  // The cap bounds only the lift: at 1, a group runs as a dense GEMM of its size even where a
  // calibration put the dense efficiency above 0.95 (2e9 FLOPs at the whole 100 TFLOP/s).
  hw.struct_size = sizeof hw;
  hw.gemm_efficiency_max = 1;
  for (double f : {0.0, 1.0}) {
    hw.grouped_gemm_efficiency = f;
    EXPECT_NEAR(perf::op_time(g, hw), 20e-6, 1e-12) << f;
  }
  hw.grouped_gemm_efficiency = 2;
  EXPECT_NEAR(perf::op_time(g, hw), 20e-6, 1e-12);  // a lift never slows it below the dense time
}

TEST(OpTime, BlockScaledFp8GemmsRunAtTheirShareOfPerTensorFp8) {
  // 2 x 1000^3 FLOPs in FP8 on a toy with a 200 TFLOP/s FP8 peak at 0.5 (per-tensor scaling): 20 us.
  // With block scales at 0.8 of that: 2e9 / (200e12 x 0.4) = 25 us. The flag means nothing to a
  // bf16 GEMM, and a 1.8 plugin's struct (no field) reads as 1.
  cotune_hardware hw = toy();
  hw.struct_size = sizeof hw;
  hw.peak_flops[COTUNE_DTYPE_FP8] = 200e12;
  hw.gemm_efficiency_fp8 = 0.5;
  cotune_op g = gemm(0, 1000, 1000, 1000);
  g.dtype = COTUNE_DTYPE_FP8;
  g.flags = COTUNE_OP_BLOCK_SCALED;
  EXPECT_NEAR(perf::op_time(g, hw), 20e-6, 1e-12);  // 0: as per-tensor
  hw.block_scaled_gemm_efficiency = 0.8;
  EXPECT_NEAR(perf::op_time(g, hw), 25e-6, 1e-12);
  g.flags = 0;
  EXPECT_NEAR(perf::op_time(g, hw), 20e-6, 1e-12);
  cotune_op b = gemm(0, 1000, 1000, 1000);
  b.flags = COTUNE_OP_BLOCK_SCALED;
  EXPECT_NEAR(perf::op_time(b, hw), 40e-6, 1e-12);  // bf16 at 0.5 of 100 TFLOP/s
  g.flags = COTUNE_OP_BLOCK_SCALED;
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, grouped_gemm_efficiency);
  EXPECT_NEAR(perf::op_time(g, hw), 20e-6, 1e-12);
}

TEST(OpTime, MemoryOpsMoveBytesAtBandwidth) {
  cotune_hardware hw = toy();
  cotune_op m = op(COTUNE_OP_MEMORY, 0);
  m.bytes = 1e9;
  EXPECT_NEAR(perf::op_time(m, hw), 1e-3, 1e-15);
}

TEST(OpTime, CollectivesAlphaBeta) {
  cotune_hardware hw = toy();
  // Ring all-reduce of 1 GB over 8 ranks at 100 GB/s: 2 x 7/8 x 10 ms = 17.5 ms.
  EXPECT_NEAR(perf::op_time(coll(0, COTUNE_COLL_ALL_REDUCE, 1e9, 8, 0, COTUNE_GROUP_TP), hw), 17.5e-3, 1e-12);
  EXPECT_NEAR(perf::op_time(coll(0, COTUNE_COLL_ALL_GATHER, 1e9, 8, 0, COTUNE_GROUP_TP), hw), 8.75e-3, 1e-12);
  EXPECT_NEAR(perf::op_time(coll(0, COTUNE_COLL_REDUCE_SCATTER, 1e9, 4, 0, COTUNE_GROUP_TP), hw), 7.5e-3, 1e-12);
  EXPECT_NEAR(perf::op_time(coll(0, COTUNE_COLL_SEND_RECV, 1e9, 2, 0, COTUNE_GROUP_PP), hw), 10e-3, 1e-12);
  EXPECT_EQ(perf::op_time(coll(0, COTUNE_COLL_ALL_REDUCE, 1e9, 1, 0, COTUNE_GROUP_TP), hw), 0);
  // Latency-bound: 1 KB over 1024 ranks with 10 us hops; the tree (2 x log2(1024) hops) beats the
  // ring (2 x 1023 hops).
  hw.net_latency_s[COTUNE_NET_NODE] = 10e-6;
  EXPECT_NEAR(perf::op_time(coll(0, COTUNE_COLL_ALL_REDUCE, 1e3, 1024, 0, COTUNE_GROUP_DP), hw),
              2 * 1e3 / 100e9 + 20 * 10e-6, 1e-12);
}

TEST(Simulate, PipelineScheduleAndBubble) {
  cotune_hardware hw = toy();
  std::vector<cotune_op> ops = {gemm(COTUNE_PHASE_FORWARD, 1000, 1000, 1000),   // 40 us
                                gemm(COTUNE_PHASE_BACKWARD, 1000, 1000, 1000),  // 40 us
                                gemm(COTUNE_PHASE_BACKWARD, 1000, 1000, 1000)}; // 40 us
  cotune_trace t = trace_of(ops, hw);
  t.micro_batches = 8;
  t.pipeline_stages = 4;
  t.tokens_per_step = 1e6;
  t.model_flops_per_gpu = 1e12;
  cotune_sim_result r = run(t);
  // 8 x 120 us + bubble (4-1) x 120 us.
  EXPECT_NEAR(r.bubble_s, 360e-6, 1e-12);
  EXPECT_NEAR(r.step_time_s, 1320e-6, 1e-12);
  EXPECT_NEAR(r.compute_s, 960e-6, 1e-12);
  EXPECT_NEAR(r.tokens_per_s, 1e6 / 1320e-6, 1e-3);
  EXPECT_NEAR(r.mfu, 1e12 / 1320e-6 / 100e12, 1e-12);
  t.virtual_stages = 3;  // interleaving divides the bubble
  EXPECT_NEAR(run(t).bubble_s, 120e-6, 1e-12);
  t.schedule = COTUNE_SCHEDULE_GPIPE;
  t.virtual_stages = 1;
  EXPECT_NEAR(run(t).bubble_s, 360e-6, 1e-12);
}

TEST(Simulate, BlockingCollectivesAreExposedOverlappedOnesHidden) {
  cotune_hardware hw = toy();
  std::vector<cotune_op> ops = {
      gemm(COTUNE_PHASE_FORWARD, 1000, 1000, 1000),                                             // 40 us
      coll(COTUNE_PHASE_FORWARD, COTUNE_COLL_ALL_REDUCE, 1e6, 8, 0, COTUNE_GROUP_TP),           // 17.5 us, blocking
      coll(COTUNE_PHASE_FORWARD, COTUNE_COLL_ALL_GATHER, 2e6, 8, 1, COTUNE_GROUP_CP),           // 17.5 us, overlapped
  };
  cotune_sim_result r = run(trace_of(ops, hw));
  EXPECT_NEAR(r.step_time_s, 57.5e-6, 1e-12);
  EXPECT_NEAR(r.exposed_comm_s[COTUNE_GROUP_TP], 17.5e-6, 1e-12);
  EXPECT_EQ(r.exposed_comm_s[COTUNE_GROUP_CP], 0);
}

TEST(Simulate, DependenciesMakeTheComputeStreamWait) {
  cotune_hardware hw = toy();
  std::vector<cotune_op> ops = {
      coll(COTUNE_PHASE_FORWARD, COTUNE_COLL_ALL_GATHER, 8e6, 8, 1, COTUNE_GROUP_CP),  // 70 us on stream 1
      gemm(COTUNE_PHASE_FORWARD, 1000, 1000, 1000),                                    // 40 us, waits for it
  };
  ops[1].depends_on = 0;
  cotune_sim_result r = run(trace_of(ops, hw));
  EXPECT_NEAR(r.step_time_s, 110e-6, 1e-12);
  EXPECT_NEAR(r.exposed_comm_s[COTUNE_GROUP_CP], 70e-6, 1e-12);
}

TEST(Simulate, GradientReductionOverlapsTheLastBackward) {
  cotune_hardware hw = toy();
  cotune_op opt = op(COTUNE_OP_MEMORY, COTUNE_PHASE_STEP);
  opt.bytes = 10e6;  // 10 us
  opt.flags = COTUNE_OP_OPTIMIZER;
  std::vector<cotune_op> ops = {
      gemm(COTUNE_PHASE_BACKWARD, 1000, 1000, 1000),                                      // 40 us
      coll(COTUNE_PHASE_STEP, COTUNE_COLL_ALL_REDUCE, 4e6, 2, 1, COTUNE_GROUP_DP),        // 40 us, hidden
      opt};
  ops[2].depends_on = 1;
  cotune_sim_result r = run(trace_of(ops, hw));
  EXPECT_NEAR(r.step_time_s, 50e-6, 1e-12);
  EXPECT_NEAR(r.optimizer_s, 10e-6, 1e-12);
  EXPECT_EQ(r.exposed_comm_s[COTUNE_GROUP_DP], 0);
  ops[1].bytes = 6e6;  // 60 us: 20 us stick out past the backward
  r = run(trace_of(ops, hw));
  EXPECT_NEAR(r.exposed_comm_s[COTUNE_GROUP_DP], 20e-6, 1e-12);
  EXPECT_NEAR(r.step_time_s, 70e-6, 1e-12);
}

TEST(Simulate, MemoryFitAndCost) {
  cotune_hardware hw = toy();
  hw.price_per_gpu_hour = 3.6;
  std::vector<cotune_op> ops = {gemm(COTUNE_PHASE_FORWARD, 1000, 1000, 1000)};
  cotune_trace t = trace_of(ops, hw);
  t.tokens_per_step = 1e6;
  t.memory.weights = 50e9;
  t.memory.activations = 20e9;
  cotune_sim_result r = run(t);
  EXPECT_EQ(r.fits, 1);
  EXPECT_DOUBLE_EQ(r.peak_memory_bytes, 70e9);
  // 8 GPUs x 40 us at $3.6/h for 1M tokens.
  EXPECT_NEAR(r.cost_per_mtokens, 3.6 * 8 * 40e-6 / 3600, 1e-15);
  t.memory.buffers = 20e9;
  EXPECT_EQ(run(t).fits, 0);
}

TEST(Simulate, RejectsMalformedTraces) {
  cotune_hardware hw = toy();
  std::vector<cotune_op> ops = {gemm(0, 1, 1, 1)};
  cotune_trace t = trace_of(ops, hw);
  t.micro_batches = 0;
  EXPECT_THROW(run(t), UserError);
  t = trace_of(ops, hw);
  ops[0].count = -1;
  EXPECT_THROW(run(t), UserError);
  ops[0].count = 1;
  ops[0].depends_on = 0;
  EXPECT_THROW(run(t), UserError);
  ops[0].depends_on = -1;
  ops[0].dtype = COTUNE_DTYPE_FP8;  // no fp8 peak on this GPU
  EXPECT_THROW(run(t), UserError);
}

TEST(RooflineTerms, WorkAtNominalRatesStretchedByThePipeline) {
  cotune_hardware hw = toy();
  hw.net_bytes_per_s[COTUNE_NET_CLUSTER] = 25e9;
  cotune_op g = gemm(COTUNE_PHASE_FORWARD, 1000, 1000, 1000);  // 2e9 FLOPs: 20 us at peak
  g.count = 3;
  cotune_op skinny = gemm(COTUNE_PHASE_BACKWARD, 1e6, 1, 1000);  // ~2e9 bytes: memory-bound, ~2 ms
  cotune_op norm = op(COTUNE_OP_MEMORY, COTUNE_PHASE_FORWARD);
  norm.bytes = 1e9;  // 1 ms
  cotune_op tp = coll(COTUNE_PHASE_FORWARD, COTUNE_COLL_ALL_REDUCE, 1e9, 4, COTUNE_STREAM_COMPUTE, COTUNE_GROUP_TP);
  cotune_op send = coll(COTUNE_PHASE_BACKWARD, COTUNE_COLL_SEND_RECV, 1e8, 2, 1, COTUNE_GROUP_PP);
  send.net_level = COTUNE_NET_CLUSTER;
  cotune_op dp = coll(COTUNE_PHASE_STEP, COTUNE_COLL_REDUCE_SCATTER, 8e9, 8, 1, COTUNE_GROUP_DP);
  cotune_op adam = op(COTUNE_OP_MEMORY, COTUNE_PHASE_STEP);
  adam.bytes = 2e9;
  const std::vector<cotune_op> ops = {g, skinny, norm, tp, send, dp, adam};
  cotune_trace t = trace_of(ops, hw);
  t.micro_batches = 6;
  t.pipeline_stages = 3;
  t.virtual_stages = 2;  // bubble (3 - 1) / 2 = 1: forward and backward count 6 + 1 = 7 times
  t.schedule = COTUNE_SCHEDULE_INTERLEAVED;

  double terms[perf::kRooflineTerms];
  perf::roofline_terms(t, terms);
  EXPECT_STREQ(perf::kRooflineTermNames[0], "compute_s");
  EXPECT_NEAR(terms[0], 7 * (3 * 20e-6 + (1e9 + 1e3 + 1e6) * 2 / 1e12), 1e-15);  // compute_s: at peak or at HBM speed
  EXPECT_NEAR(terms[1], 7 * 1e-3, 1e-15);                   // memory_s
  EXPECT_DOUBLE_EQ(terms[2], 7 * (3 + 1 + 1) + 1);          // kernels (the optimizer's counts once)
  EXPECT_NEAR(terms[3], 7 * (2 * 3.0 / 4 * 1e9 / 100e9), 1e-15);  // comm_node_s: ring all-reduce
  EXPECT_NEAR(terms[4], 7 * (1e8 / 25e9), 1e-15);           // comm_cluster_s
  EXPECT_EQ(terms[5], 0.0);                                 // comm_island_s
  EXPECT_DOUBLE_EQ(terms[6], 7 * (2 * 3 + 1) + 7);          // comm_hops
  EXPECT_NEAR(terms[7], 7.0 / 8 * 8e9 / 100e9 + 2e9 / 1e12, 1e-15);  // step_s, once per step
  EXPECT_EQ(terms[8], 1.0);                                 // fixed

  // GPipe pays the whole (p - 1) in its bubble.
  t.schedule = COTUNE_SCHEDULE_GPIPE;
  perf::roofline_terms(t, terms);
  EXPECT_NEAR(terms[1], 8 * 1e-3, 1e-15);
}

TEST(RooflineTerms, RejectMalformedTraces) {
  const std::vector<cotune_op> ops = {gemm(COTUNE_PHASE_FORWARD, 10, 10, 10)};
  cotune_trace t = trace_of(ops, toy());
  t.micro_batches = 0;
  double terms[perf::kRooflineTerms];
  EXPECT_THROW(perf::roofline_terms(t, terms), UserError);
  t = trace_of(ops, toy());
  t.hardware.hbm_bytes_per_s = 0;
  EXPECT_THROW(perf::roofline_terms(t, terms), UserError);
  std::vector<cotune_op> odd = ops;
  odd[0].kind = 42;
  t = trace_of(odd, toy());
  EXPECT_THROW(perf::roofline_terms(t, terms), UserError);
}
