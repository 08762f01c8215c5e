// The cuda executor's kernel plan, on the CPU: which trace ops are measured and which are left to
// the model, the shapes, dtypes and repeat counts of the measurements, deduplication, slicing of
// shapes too large to run at once, and errors for malformed ops. Also on real traces of the llm
// space loaded through the Registry.
#include "kernel_plan.hpp"

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace cotune_cuda;
using ::testing::HasSubstr;

namespace {

cotune_op make_op(int32_t kind, int32_t phase, const char* label, double count = 1) {
  cotune_op op{};
  op.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
  op.kind = kind;
  op.phase = phase;
  op.depends_on = -1;
  op.dtype = COTUNE_DTYPE_BF16;
  op.count = count;
  op.label = cotune_str{label, std::strlen(label)};
  return op;
}

cotune_op gemm(int32_t phase, const char* label, double m, double n, double k, double count, int32_t dtype) {
  cotune_op op = make_op(COTUNE_OP_GEMM, phase, label, count);
  op.m = m;
  op.n = n;
  op.k = k;
  op.dtype = dtype;
  return op;
}

cotune_op attention(int32_t phase, double b, double h, double sq, double skv, double d, uint32_t flags) {
  cotune_op op = make_op(COTUNE_OP_ATTENTION, phase, "attention", 2);
  op.batch = b;
  op.heads = h;
  op.seq_q = sq;
  op.seq_kv = skv;
  op.head_dim = d;
  op.flags = flags;
  return op;
}

cotune_trace make_trace(const std::vector<cotune_op>& ops, int32_t micro_batches = 4) {
  cotune_trace t{};
  t.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
  t.ops = ops.data();
  t.num_ops = ops.size();
  t.op_stride = sizeof(cotune_op);
  t.micro_batches = micro_batches;
  t.pipeline_stages = 1;
  t.virtual_stages = 1;
  return t;
}

}  // namespace

TEST(CudaPlan, MeasuresComputeOpsAndLeavesCommunicationToTheModel) {
  cotune_op coll = make_op(COTUNE_OP_COLLECTIVE, COTUNE_PHASE_FORWARD, "tp_allreduce", 32);
  coll.bytes = 1e6;
  coll.group_size = 8;
  cotune_op norm = make_op(COTUNE_OP_MEMORY, COTUNE_PHASE_FORWARD, "layernorm", 32);
  norm.bytes = 3e6 + 1;  // odd: the copy kernel reads and writes half each
  const std::vector<cotune_op> ops = {
      gemm(COTUNE_PHASE_FORWARD, "qkv", 8192, 1536, 4096, 32, COTUNE_DTYPE_BF16),
      coll,
      norm,
      gemm(COTUNE_PHASE_BACKWARD, "qkv_dgrad", 8192, 1536, 4096, 32, COTUNE_DTYPE_BF16),  // same shape
      gemm(COTUNE_PHASE_STEP, "optimizer", 1, 1, 1, 0, COTUNE_DTYPE_FP32),                 // runs zero times
      gemm(COTUNE_PHASE_BACKWARD, "qkv_wgrad", 4096, 1536, 8192, 32, COTUNE_DTYPE_BF16),
  };
  const KernelPlan plan = make_kernel_plan(make_trace(ops));

  ASSERT_EQ(plan.measurements.size(), 3u);
  EXPECT_EQ(plan.measurements[0].key(), "gemm/bf16/8192x1536x4096");
  EXPECT_EQ(plan.measurements[1].key(), "memory/3000002B");
  EXPECT_EQ(plan.measurements[2].key(), "gemm/bf16/4096x1536x8192");

  ASSERT_EQ(plan.ops.size(), 4u);
  EXPECT_EQ(plan.ops[0].op_index, 0u);
  EXPECT_EQ(plan.ops[2].op_index, 3u);
  EXPECT_EQ(plan.ops[0].measurement, plan.ops[2].measurement);  // forward and dgrad share one timing
  for (const PlannedOp& p : plan.ops) {
    EXPECT_DOUBLE_EQ(p.scale, 1.0);
    EXPECT_DOUBLE_EQ(p.runs_per_step, 32 * 4);  // count x micro-batches
  }

  ASSERT_EQ(plan.modelled.size(), 2u);
  EXPECT_EQ(plan.modelled[0].op_index, 1u);
  EXPECT_THAT(plan.modelled[0].reason, HasSubstr("performance model"));
  EXPECT_EQ(plan.modelled[1].op_index, 4u);
  EXPECT_THAT(plan.modelled[1].reason, HasSubstr("zero"));
}

TEST(CudaPlan, DtypeIsPartOfTheShapeAndStepOpsRunOncePerStep) {
  const std::vector<cotune_op> ops = {
      gemm(COTUNE_PHASE_FORWARD, "mlp_up", 4096, 14336, 4096, 8, COTUNE_DTYPE_FP8),
      gemm(COTUNE_PHASE_FORWARD, "mlp_up", 4096, 14336, 4096, 8, COTUNE_DTYPE_BF16),
      gemm(COTUNE_PHASE_STEP, "step_gemm", 4096, 14336, 4096, 3, COTUNE_DTYPE_BF16),
  };
  const KernelPlan plan = make_kernel_plan(make_trace(ops, 16));
  ASSERT_EQ(plan.measurements.size(), 2u);
  EXPECT_EQ(plan.measurements[0].dtype, COTUNE_DTYPE_FP8);
  EXPECT_EQ(plan.measurements[0].key(), "gemm/fp8/4096x14336x4096");
  EXPECT_EQ(plan.measurements[1].key(), "gemm/bf16/4096x14336x4096");
  // fp8 operands are one byte, the bf16 output two.
  EXPECT_DOUBLE_EQ(plan.measurements[0].device_bytes(), (4096.0 * 4096 + 4096.0 * 14336) * 1 + 4096.0 * 14336 * 2);
  ASSERT_EQ(plan.ops.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.ops[0].runs_per_step, 8 * 16);
  EXPECT_DOUBLE_EQ(plan.ops[2].runs_per_step, 3);
  EXPECT_EQ(plan.ops[2].measurement, plan.ops[1].measurement);
}

TEST(CudaPlan, AttentionForwardBackwardRecomputeAndCausalFraction) {
  const std::vector<cotune_op> ops = {
      attention(COTUNE_PHASE_FORWARD, 2, 16, 4096, 4096, 128, COTUNE_OP_CAUSAL),
      attention(COTUNE_PHASE_BACKWARD, 2, 16, 4096, 4096, 128, COTUNE_OP_CAUSAL),
      attention(COTUNE_PHASE_BACKWARD, 2, 16, 4096, 4096, 128, COTUNE_OP_CAUSAL | COTUNE_OP_RECOMPUTE),
      attention(COTUNE_PHASE_FORWARD, 2, 16, 1024, 4096, 128, 0),
  };
  const KernelPlan plan = make_kernel_plan(make_trace(ops));
  ASSERT_EQ(plan.measurements.size(), 3u);
  EXPECT_EQ(plan.measurements[0].key(), "attention_fwd/bf16/32h4096q4096kv128d");  // batch x heads
  EXPECT_EQ(plan.measurements[1].key(), "attention_bwd/bf16/32h4096q4096kv128d");
  EXPECT_EQ(plan.measurements[2].key(), "attention_fwd/bf16/32h1024q4096kv128d");
  ASSERT_EQ(plan.ops.size(), 4u);
  EXPECT_EQ(plan.ops[2].measurement, 0u);  // recomputation inside backward reruns the forward
  const double causal = (4096.0 * 4097 / 2) / (4096.0 * 4096);
  EXPECT_DOUBLE_EQ(plan.ops[0].scale, causal);
  EXPECT_DOUBLE_EQ(plan.ops[1].scale, causal);
  EXPECT_DOUBLE_EQ(plan.ops[3].scale, 1.0);
  EXPECT_DOUBLE_EQ(plan.ops[0].runs_per_step, 2 * 4);
}

TEST(CudaPlan, CausalFractionCountsTheUnmaskedScores) {
  EXPECT_DOUBLE_EQ(causal_fraction(1, 1), 1.0);
  EXPECT_DOUBLE_EQ(causal_fraction(4, 4), 10.0 / 16);
  // Four queries at the end of eight keys: rows see 5, 6, 7, 8 keys.
  EXPECT_DOUBLE_EQ(causal_fraction(4, 8), 26.0 / 32);
  // More queries than keys: the first four rows see nothing, then 1..4.
  EXPECT_DOUBLE_EQ(causal_fraction(8, 4), 10.0 / 32);
}

TEST(CudaPlan, SlicesShapesTooLargeToRunAtOnce) {
  PlanLimits limits;
  limits.max_measurement_bytes = 256.0 * (1 << 20);  // K and V of one 131072-key head are 64 MiB
  cotune_op big_copy = make_op(COTUNE_OP_MEMORY, COTUNE_PHASE_FORWARD, "embedding", 1);
  big_copy.bytes = 1e9;
  const std::vector<cotune_op> ops = {
      gemm(COTUNE_PHASE_FORWARD, "logits", 65536, 128256, 4096, 1, COTUNE_DTYPE_BF16),
      attention(COTUNE_PHASE_FORWARD, 1, 8, 131072, 131072, 128, 0),
      big_copy,
  };
  const KernelPlan plan = make_kernel_plan(make_trace(ops), limits);
  ASSERT_EQ(plan.ops.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Measurement& m = plan.measurements[plan.ops[i].measurement];
    EXPECT_LE(m.device_bytes(), limits.max_measurement_bytes) << m.key();
    EXPECT_GT(plan.ops[i].scale, 1.0) << m.key();
  }
  const Measurement& g = plan.measurements[plan.ops[0].measurement];
  EXPECT_EQ(g.k, 4096);  // the reduction dimension is never sliced
  EXPECT_DOUBLE_EQ(plan.ops[0].scale, (65536.0 / g.m) * (128256.0 / g.n));
  const Measurement& a = plan.measurements[plan.ops[1].measurement];
  EXPECT_EQ(a.heads, 1);  // heads first, then queries
  EXPECT_EQ(a.seq_kv, 131072);
  EXPECT_DOUBLE_EQ(plan.ops[1].scale, 8.0 * 131072.0 / a.seq_q);
  const Measurement& c = plan.measurements[plan.ops[2].measurement];
  EXPECT_NEAR(plan.ops[2].scale * c.bytes, 1e9, 2 * plan.ops[2].scale);
}

TEST(CudaPlan, ReadsOpsAtTheWritersStride) {
  struct WiderOp {  // a writer whose op struct is larger than ours (a later ABI minor)
    cotune_op op;
    double extra;
  };
  std::vector<WiderOp> ops(2);
  ops[0].op = gemm(COTUNE_PHASE_FORWARD, "a", 128, 256, 512, 1, COTUNE_DTYPE_FP16);
  ops[1].op = gemm(COTUNE_PHASE_FORWARD, "b", 256, 256, 256, 1, COTUNE_DTYPE_FP16);
  cotune_trace t = make_trace({});
  t.ops = &ops[0].op;
  t.num_ops = 2;
  t.op_stride = sizeof(WiderOp);
  const KernelPlan plan = make_kernel_plan(t);
  ASSERT_EQ(plan.measurements.size(), 2u);
  EXPECT_EQ(plan.measurements[1].key(), "gemm/fp16/256x256x256");
}

TEST(CudaPlan, RejectsMalformedOpsNamingThem) {
  auto error_of = [](std::vector<cotune_op> ops) {
    try {
      make_kernel_plan(make_trace(ops));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of({gemm(COTUNE_PHASE_FORWARD, "qkv", 0, 4, 4, 1, COTUNE_DTYPE_BF16)}),
              HasSubstr("op 0 ('qkv') has m = 0"));
  EXPECT_THAT(error_of({gemm(COTUNE_PHASE_FORWARD, "qkv", 4, NAN, 4, 1, COTUNE_DTYPE_BF16)}),
              HasSubstr("has n = nan"));
  EXPECT_THAT(error_of({gemm(COTUNE_PHASE_FORWARD, "qkv", 4, 4, 4, -1, COTUNE_DTYPE_BF16)}), HasSubstr("count"));
  EXPECT_THAT(error_of({gemm(COTUNE_PHASE_FORWARD, "qkv", 4, 4, 4, 1, 17)}), HasSubstr("unknown dtype 17"));
  cotune_op odd = make_op(99, COTUNE_PHASE_FORWARD, "mystery");
  EXPECT_THAT(error_of({odd}), HasSubstr("op 0 ('mystery') has unknown kind 99"));
  cotune_op fp8_attention = attention(COTUNE_PHASE_FORWARD, 1, 1, 8, 8, 8, 0);
  fp8_attention.dtype = COTUNE_DTYPE_FP8;
  EXPECT_THAT(error_of({fp8_attention}), HasSubstr("fp8 attention"));
}

// Real traces from the llm space plugin.
class CudaPlanOnLlmTraces : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string lib = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";
    if (!registry_.load_file(lib)) GTEST_SKIP() << "the llm space plugin is not built: " << lib;
  }
  cotune::core::Registry registry_;
};

TEST_F(CudaPlanOnLlmTraces, EveryComputeOpIsMeasuredAtItsOwnShapeAndDtype) {
  for (const char* dtype : {"bf16", "fp8"}) {
    for (const char* attention_kind : {"flash", "unfused"}) {
      SCOPED_TRACE(std::string(dtype) + " " + attention_kind);
      const nlohmann::json workload = {
          {"model", {{"preset", "llama3-8b"}}},
          {"training", {{"global_batch", 256}, {"dtype", dtype}, {"attention", attention_kind}}},
          {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}};
      auto space = registry_.make_space("llm", workload.dump());
      const auto config = space->parse(R"({"tp": 2, "pp": 2, "micro_batch": 1, "recompute": "full"})");
      const cotune_trace& trace = space->lower(config.data());
      const KernelPlan plan = make_kernel_plan(trace);

      std::set<size_t> planned, modelled;
      std::set<std::string> keys;
      for (const Measurement& m : plan.measurements) EXPECT_TRUE(keys.insert(m.key()).second) << m.key();
      for (const ModelledOp& m : plan.modelled) modelled.insert(m.op_index);
      for (const PlannedOp& p : plan.ops) {
        planned.insert(p.op_index);
        const cotune_op& op = trace_op(trace, p.op_index);
        const Measurement& m = plan.measurements[p.measurement];
        EXPECT_DOUBLE_EQ(p.runs_per_step, op.count * (op.phase == COTUNE_PHASE_STEP ? 1 : trace.micro_batches));
        if (op.kind == COTUNE_OP_GEMM) {
          EXPECT_EQ(m.kind, MeasureKind::kGemm);
          EXPECT_EQ(m.dtype, op.dtype);
          EXPECT_DOUBLE_EQ(double(m.m) * double(m.n) * p.scale, op.m * op.n) << m.key();
          EXPECT_DOUBLE_EQ(double(m.k), op.k);
        } else if (op.kind == COTUNE_OP_ATTENTION) {
          EXPECT_EQ(m.dtype, COTUNE_DTYPE_BF16);  // the llm space runs attention in bf16 even for fp8
          EXPECT_EQ(m.head_dim, op.head_dim);
          EXPECT_EQ(m.seq_kv, op.seq_kv);
        } else {
          EXPECT_EQ(op.kind, COTUNE_OP_MEMORY);
          EXPECT_NEAR(double(m.bytes) * p.scale, op.bytes, 2 * p.scale);
        }
      }
      for (size_t i = 0; i < trace.num_ops; ++i) {
        const cotune_op& op = trace_op(trace, i);
        const bool is_planned = planned.count(i) > 0, is_modelled = modelled.count(i) > 0;
        EXPECT_NE(is_planned, is_modelled) << "op " << i << " must be measured or modelled, not both";
        if (op.kind == COTUNE_OP_COLLECTIVE) {
          EXPECT_TRUE(is_modelled) << "op " << i;
        }
        if (op.kind == COTUNE_OP_GEMM && op.count > 0) {
          EXPECT_TRUE(is_planned) << "op " << i;
          // FP8 runs the layers' GEMMs in fp8; the output layer, the router and (unfused) attention's
          // products stay in bf16, as in Megatron-LM.
          const std::string label(op.label.data, op.label.len);
          const bool bf16_kept = label.rfind("output_layer", 0) == 0 || label.rfind("router", 0) == 0 ||
                                 label.rfind("attention_scores", 0) == 0 || label.rfind("attention_values", 0) == 0;
          if (std::string(dtype) == "fp8" && op.phase != COTUNE_PHASE_STEP && !bf16_kept) {
            EXPECT_EQ(op.dtype, COTUNE_DTYPE_FP8) << label;
          }
        }
      }
      // Repeated layers share their shapes: far fewer measurements than ops.
      EXPECT_LT(plan.measurements.size(), plan.ops.size());
      EXPECT_FALSE(plan.modelled.empty());
    }
  }
}
