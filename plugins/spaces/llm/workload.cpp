// Parser of the LLM workload JSON.
#include "workload.hpp"

#include <cotune/support/likely_meant.hpp>

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace cotune_llm {

using nlohmann::json;

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_BF16: return "bf16";
    case COTUNE_DTYPE_FP16: return "fp16";
    case COTUNE_DTYPE_FP8: return "fp8";
    case COTUNE_DTYPE_FP4: return "fp4";
    case COTUNE_DTYPE_FP32: return "fp32";
    default: return "tf32";
  }
}

bool block_scaled_tensor_cores(const cotune_hardware& hw) {
  return hw.struct_size >= COTUNE_STRUCT_SIZE(cotune_hardware, peak_flops_fp4) && hw.peak_flops_fp4 > 0;
}

Fp8Recipe fp8_recipe_on(const Training& t, const cotune_hardware& hw) {
  if (t.fp8_recipe != Fp8Recipe::kAuto) return t.fp8_recipe;
  return block_scaled_tensor_cores(hw) ? Fp8Recipe::kMxfp8 : Fp8Recipe::kTensorwise;
}

const char* fp8_recipe_name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kMxfp8: return "mxfp8";
    case Fp8Recipe::kBlockwise: return "blockwise";
    default: return "auto";
  }
}

double dtype_peak(const cotune_hardware& hw, int32_t dtype) {
  if (dtype == COTUNE_DTYPE_FP4)
    return hw.struct_size >= COTUNE_STRUCT_SIZE(cotune_hardware, peak_flops_fp4) ? hw.peak_flops_fp4 : 0;
  return dtype >= 0 && dtype < COTUNE_DTYPE_COUNT ? hw.peak_flops[dtype] : 0;
}

namespace {

bool boolean(const json& v, const std::string& at) {
  if (!v.is_boolean()) throw std::invalid_argument(at + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string text(const json& v, const std::string& at) {
  if (!v.is_string()) throw std::invalid_argument(at + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

Training parse_training(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("/training: expected an object");
  Training t;
  if (!j.contains("global_batch")) throw std::invalid_argument("/training/global_batch: missing (sequences per step)");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string at = "/training/" + k;
    const json& v = it.value();
    if (k == "global_batch") {
      if (!v.is_number() || !(v.get<double>() >= 1) || v.get<double>() != std::floor(v.get<double>()) ||
          v.get<double>() > 1e9)  // beyond, micro-batch counts overflow the step trace
        throw std::invalid_argument(at + ": expected a positive integer (sequences per step), got " + v.dump());
      t.global_batch = v.get<double>();
    } else if (k == "dtype") {
      const std::string d = text(v, at);
      if (d == "bf16") t.dtype = COTUNE_DTYPE_BF16;
      else if (d == "fp16") t.dtype = COTUNE_DTYPE_FP16;
      else if (d == "fp8") t.dtype = COTUNE_DTYPE_FP8;
      else if (d == "fp4") t.dtype = COTUNE_DTYPE_FP4;
      else throw std::invalid_argument(at + ": expected bf16, fp16, fp8 or fp4, got '" + d + "'");
    } else if (k == "optimizer") {
      const std::string o = text(v, at);
      if (o != "adam" && o != "adamw")
        throw std::invalid_argument(at + ": expected adam or adamw (mixed-precision Adam), got '" + o + "'");
    } else if (k == "attention") {
      const std::string a = text(v, at);
      if (a == "flash") t.attention = Attention::kFlash;
      else if (a == "unfused") t.attention = Attention::kUnfused;
      else throw std::invalid_argument(at + ": expected flash or unfused, got '" + a + "'");
    } else if (k == "kernels") {
      const std::string a = text(v, at);
      if (a == "fused") t.kernels = Kernels::kFused;
      else if (a == "compiled") t.kernels = Kernels::kCompiled;
      else if (a == "eager") t.kernels = Kernels::kEager;
      else throw std::invalid_argument(at + ": expected fused, compiled or eager, got '" + a + "'");
    } else if (k == "dropout") {
      t.dropout = boolean(v, at);
    } else if (k == "overlap_grad_reduce") {
      t.overlap_grad_reduce = boolean(v, at);
    } else if (k == "overlap_moe_comm") {
      t.overlap_moe_comm = boolean(v, at);
    } else if (k == "tp_comm_overlap") {
      t.tp_comm_overlap = boolean(v, at);
    } else if (k == "cross_entropy_fusion") {
      t.cross_entropy_fusion = boolean(v, at);
    } else if (k == "moe_dispatcher") {
      const std::string d = text(v, at);
      if (d == "alltoall") t.moe_dispatcher = MoeDispatcher::kAllToAll;
      else if (d == "flex") t.moe_dispatcher = MoeDispatcher::kFlex;
      else throw std::invalid_argument(at + ": expected alltoall or flex, got '" + d + "'");
    } else if (k == "fp8_recipe") {
      const std::string r = text(v, at);
      if (r == "tensorwise") t.fp8_recipe = Fp8Recipe::kTensorwise;
      else if (r == "mxfp8") t.fp8_recipe = Fp8Recipe::kMxfp8;
      else if (r == "blockwise") t.fp8_recipe = Fp8Recipe::kBlockwise;
      else if (r == "delayed")
        throw std::invalid_argument(at + ": 'delayed' (Megatron-LM's delayed scaling) scales per tensor too: write "
                                    "tensorwise, which the model times alike");
      else if (r != "auto")
        throw std::invalid_argument(at + ": expected auto, tensorwise, mxfp8 or blockwise, got '" + r + "'" +
                                    cotune::support::did_you_mean_listed(r, "auto, tensorwise, mxfp8, blockwise"));
    } else if (k == "grad_reduce") {
      const std::string g = text(v, at);
      if (g == "fp32") t.grad_reduce = GradReduce::kFp32;
      else if (g == "bf16") t.grad_reduce = GradReduce::kBf16;
      else throw std::invalid_argument(at + ": expected fp32 or bf16, got '" + g + "'");
    } else if (k == "peft") {
      const std::string p = text(v, at);
      if (p == "lora") t.lora = true;
      else if (p != "none") throw std::invalid_argument(at + ": expected none or lora, got '" + p + "'");
    } else {
      constexpr const char* kKnown =
          "global_batch, dtype, optimizer, attention, kernels, dropout, overlap_grad_reduce, overlap_moe_comm, "
          "tp_comm_overlap, cross_entropy_fusion, moe_dispatcher, fp8_recipe, grad_reduce, peft";
      throw std::invalid_argument(at + ": unknown training field" + cotune::support::did_you_mean_listed(k, kKnown) +
                                  " (expected " + kKnown + ")");
    }
  }
  if (t.fp8_recipe != Fp8Recipe::kAuto && t.dtype != COTUNE_DTYPE_FP8)
    throw std::invalid_argument("/training/fp8_recipe: scales FP8 GEMMs; the training's dtype is " +
                                std::string(dtype_name(t.dtype)) + " (set dtype fp8, or leave fp8_recipe out)");
  return t;
}

}  // namespace

Workload parse_workload(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("workload: expected a JSON object with model, training and cluster");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "model" && k != "training" && k != "cluster" && k != "name" && k != "description")
      throw std::invalid_argument("/" + k + ": unknown workload field" +
                                  cotune::support::did_you_mean_listed(k, "model, training, cluster") +
                                  " (expected model, training, cluster)");
  }
  for (const char* k : {"model", "training", "cluster"})
    if (!j.contains(k)) throw std::invalid_argument(std::string("/") + k + ": missing");
  Workload w;
  w.model = parse_model(j["model"], "/model");
  w.training = parse_training(j["training"]);
  if (!j["cluster"].is_object()) throw std::invalid_argument("/cluster: expected an object");
  w.cluster = j["cluster"];
  return w;
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace cotune_llm
