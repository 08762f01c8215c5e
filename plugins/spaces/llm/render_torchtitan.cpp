// TorchTitan job configurations (docs/exports.md, torchtitan_rules.md): a TOML job file at v0.1.0 and
// v0.2.2, command-line overrides of a Python config function at HEAD (TOML loading is gone there).
#include <string>
#include <vector>

#include "render.hpp"

namespace cotune_llm {
namespace {

using render_detail::num;

// TorchTitan picks a model by registry name and flavor; these are the flavors whose dimensions a
// workload can match (SwiGLU and rotary, as Llama 3 is: a GPT-style model of the same sizes is not
// one of them).
struct Flavor {
  const char* name;
  const char* flavor;
  double layers, hidden, heads, kv_heads, ffn_hidden;
};
const Flavor kFlavors[] = {
    {"llama3", "8B", 32, 4096, 32, 8, 14336},
    {"llama3", "70B", 80, 8192, 64, 8, 28672},
    {"llama3", "405B", 126, 16384, 128, 8, 53248},
};

const Flavor* flavor_of(const Model& m) {
  for (const Flavor& f : kFlavors)
    if (m.layers == f.layers && m.hidden == f.hidden && m.heads == f.heads && m.kv_heads == f.kv_heads &&
        m.ffn_hidden == f.ffn_hidden && m.gated_mlp && !m.moe() && !m.mla.on())
      return &f;
  return nullptr;
}

std::string dimensions(const Model& m) {
  std::string s = num(m.layers) + " layers, hidden " + num(m.hidden) + ", " + num(m.heads) + " heads (" +
                  num(m.kv_heads) + " KV), FFN " + num(m.ffn_hidden) + ", vocab " + num(m.vocab);
  if (m.moe()) s += ", " + num(m.experts) + " experts (top " + num(m.top_k) + ", FFN " + num(m.expert_ffn_hidden) + ")";
  return s;
}

const char* schedule(const Config& c) { return c.vpp > 1 ? "Interleaved1F1B" : "1F1B"; }

// TOML tables in order; each line "key = value".
class Toml {
 public:
  void table(const std::string& name) { out_ += (out_.empty() ? "[" : "\n[") + name + "]\n"; }
  void set(const std::string& key, const std::string& value) { out_ += key + " = " + value + "\n"; }
  void set(const std::string& key, double v) { set(key, num(v)); }
  static std::string str(const std::string& s) { return "\"" + s + "\""; }
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// zero 2 keeps the gathered weights, zero 3 frees them after the forward. TorchTitan's "default"
// frees them only without a pipeline (parallelize.py: reshard_after_forward = not pp_enabled), so
// zero 3 with pp > 1 says "always".
const char* reshard_after_forward(const Config& c) { return c.zero == 2 ? "never" : "always"; }

std::string toml_job(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  const Model& m = w.model;
  const bool v010 = t.is(Framework::kTorchtitan, "v0.1.0");
  const bool fp8 = w.training.dtype == COTUNE_DTYPE_FP8;
  // MXFP8 through torchao's MX converter; per-tensor scaling through its float8 one.
  const bool mx = fp8 && fp8_recipe_on(w.training, hw) == Fp8Recipe::kMxfp8;
  const std::string kind = mx ? "mx" : "float8";
  const bool compiled = w.training.kernels == Kernels::kCompiled;
  Toml j;
  j.table("model");
  if (const Flavor* f = flavor_of(m)) {
    j.set("name", Toml::str(f->name));
    j.set("flavor", Toml::str(f->flavor));
  } else {
    // Left out, TorchTitan's defaults (llama3, debugmodel) would train another model without a word;
    // a name no registry has stops the launch until it is set.
    j.set("name", Toml::str("<your model's registry name>"));
    j.set("flavor", Toml::str("<its flavor with the dimensions above>"));
  }
  // MoE experts are grouped GEMMs: v0.2.2 converts them with their own converter (v0.1.0 has no MoE).
  if (fp8)
    j.set("converters", v010 ? "[\"" + kind + "\"]"
                             : m.moe() ? "[\"quantize.linear." + kind + "\", \"quantize.grouped_mm." + kind + "\"]"
                                       : "[\"quantize.linear." + kind + "\"]");

  j.table("training");
  // Without pipelining a data-parallel rank runs micro-batches of local_batch_size and accumulates
  // global / (local x dp) of them; a pipeline takes the whole local batch and cuts it into
  // pipeline_parallel_microbatch_size pieces.
  j.set("local_batch_size", c.pp > 1 ? w.training.global_batch / c.dp : c.micro_batch);
  j.set("global_batch_size", w.training.global_batch);
  j.set("seq_len", m.seq_len);
  j.set("mixed_precision_param", Toml::str("bfloat16"));
  j.set("mixed_precision_reduce", Toml::str("float32"));
  if (compiled && v010) j.set("compile", "true");
  if (compiled && !v010) {
    j.table("compile");
    j.set("enable", "true");
    j.set("components", "[\"model\", \"loss\"]");
  }

  j.table("parallelism");
  j.set("data_parallel_replicate_degree", c.zero == 0 ? c.dp : 1);
  j.set("data_parallel_shard_degree", c.zero == 0 ? 1 : c.dp);
  if (c.zero >= 2) j.set("fsdp_reshard_after_forward", Toml::str(reshard_after_forward(c)));
  j.set("tensor_parallel_degree", c.tp);
  if (w.training.tp_comm_overlap && c.tp > 1) j.set("enable_async_tensor_parallel", "true");  // needs compile
  j.set("context_parallel_degree", c.cp);
  if (!v010 && m.moe()) {
    j.set("expert_parallel_degree", c.ep);
    if (c.ep > 1) j.set("expert_tensor_parallel_degree", c.etp);
    if (c.ep > 1 && w.training.moe_dispatcher == MoeDispatcher::kFlex) j.set("expert_parallel_comm_backend", Toml::str("deepep"));
  }
  j.set("pipeline_parallel_degree", c.pp);
  if (c.pp > 1) {
    j.set("pipeline_parallel_schedule", Toml::str(schedule(c)));
    j.set("pipeline_parallel_microbatch_size", c.micro_batch);
    const double l = torchtitan_layers_per_stage(m.layers, c.pp, c.vpp, t);
    if (l > 0) j.set("pipeline_parallel_layers_per_stage", l);
  }

  j.table("activation_checkpoint");
  j.set("mode", Toml::str(kRecomputeNames[c.recompute]));
  if (c.recompute == kRecomputeSelective) j.set("selective_ac_option", Toml::str("op"));

  if (fp8) {
    j.table(v010 ? kind : "quantize.linear." + kind);
    if (mx && v010) j.set("recipe_name", Toml::str("mxfp8"));
    // Tensorwise scaling (no recipe_name) is the one that gathers FSDP shards in FP8.
    if (!mx && c.zero >= 2 && c.dp > 1) {
      j.set("enable_fsdp_float8_all_gather", "true");
      j.set("precompute_float8_dynamic_scale_for_fsdp", "true");
    }
    if (!v010 && m.moe()) {
      j.table("quantize.grouped_mm." + kind);
      j.set("fqns", "[\"experts\"]");
    }
  }

  double nodes = 1, per_node = 1;
  const std::string world = render_detail::world(c, hw, &nodes, &per_node);
  std::string head = "# " + t.label() + " job config for " + world + ": torchrun --nnodes " + num(nodes) + " --nproc-per-node " + num(per_node) +
                     " -m torchtitan.train --job.config_file job.toml\n";
  head += "# the model cotune modelled: " + dimensions(m) + "\n";
  if (flavor_of(m) == nullptr)
    head += "# [model] name and flavor: set them to your registry's entry with these dimensions (TorchTitan "
            "refuses the placeholders; without them it would train its default llama3 debugmodel)\n";
  return head + j.text();
}

// HEAD: one override per line; booleans are switches; the activation-checkpointing variant is a
// subcommand ("selective", the default, is left out).
std::string cli_overrides(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  const Model& m = w.model;
  std::vector<std::string> a;
  auto set = [&a](const std::string& key, const std::string& value) { a.push_back("--" + key + " " + value); };
  auto setn = [&set](const std::string& key, double v) { set(key, num(v)); };
  const double tokens = c.micro_batch * m.seq_len;
  setn("training.num_tokens_per_microbatch_per_dp_rank", tokens);
  setn("training.num_tokens_per_train_step", w.training.global_batch * m.seq_len);
  setn("training.max_context_length", m.seq_len);
  set("training.mixed_precision_param", "bfloat16");
  if (c.pp > 1) a.push_back("--training.disable_cuda_graphs");  // CUDA graphs are refused with PP
  if (w.training.kernels == Kernels::kCompiled) a.push_back("--compile.enable");
  setn("parallelism.data_parallel_replicate_degree", c.zero == 0 ? c.dp : 1);
  setn("parallelism.data_parallel_shard_degree", c.zero == 0 ? 1 : c.dp);
  if (c.zero >= 2) set("parallelism.fsdp_reshard_after_forward", reshard_after_forward(c));
  // The default spmd_types backend shards over dp_shard alone; cotune's FSDP spans dp x cp.
  if (c.zero >= 2 && c.cp > 1) set("parallelism.spmd_backend", "partial_dtensor");
  setn("parallelism.tensor_parallel_degree", c.tp);
  if (w.training.tp_comm_overlap && c.tp > 1) a.push_back("--compile.enable_async_tensor_parallel");
  setn("parallelism.context_parallel_degree", c.cp);
  if (m.moe()) setn("parallelism.expert_parallel_degree", c.ep);
  setn("parallelism.pipeline_parallel_degree", c.pp);
  if (c.pp > 1) {
    set("parallelism.pipeline_parallel_schedule", schedule(c));
    setn("parallelism.num_pp_microbatches", w.training.global_batch / (c.dp * c.micro_batch));
    const double l = torchtitan_layers_per_stage(m.layers, c.pp, c.vpp, t);
    if (l > 0) setn("parallelism.pipeline_parallel_layers_per_stage", l);
  }
  if (c.recompute != kRecomputeSelective)
    a.push_back(std::string("activation_checkpoint:") + (c.recompute == kRecomputeFull ? "full" : "none"));

  double nodes = 1, per_node = 1;
  const Flavor* f = flavor_of(m);
  const std::string world = render_detail::world(c, hw, &nodes, &per_node);
  std::string out = "# " + t.label() + ": command-line overrides for " + world + "\n# torchrun --nnodes " + num(nodes) + " --nproc-per-node " + num(per_node) +
                    " -m torchtitan.train --module " + (f ? f->name : std::string("<model>")) +
                    " --config <config function> \"${TORCHTITAN_ARGS[@]}\"\n";
  out += "# the model cotune modelled: " + dimensions(m) + "\n";
  if (w.training.dtype == COTUNE_DTYPE_FP8)
    out += std::string("# float8: add Float8LinearConverter.Config(recipe_name=\"rowwise\")") +
           (m.moe() ? " and Float8GroupedExpertsConverter.Config()" : "") +
           " to your config function's model_registry converters (HEAD has no command-line path)\n";
  out += "TORCHTITAN_ARGS=(\n";
  for (const std::string& l : a) out += "  " + l + "\n";
  return out + ")\n";
}

}  // namespace

std::string render_torchtitan(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  if (t.is(Framework::kTorchtitan, "v0.1.0") || t.is(Framework::kTorchtitan, "v0.2.2")) return toml_job(w, c, t, hw);
  return cli_overrides(w, c, t, hw);
}

}  // namespace cotune_llm
