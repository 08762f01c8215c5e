/*
 * Golden layout of every public struct of cotune.h on LP64 (x86-64, aarch64). An accidental
 * reordering, removal or resize fails here; appending a field changes only the sizes, which are
 * then updated together with sdk/CHANGELOG.md. Compiled as C99 with -pedantic -Werror, so the
 * header itself is proved to be plain C.
 */
#include <cotune/cotune.h>

#include <stdio.h>

static int failures = 0;

#define SIZE(type, expected)                                                                \
  do {                                                                                      \
    if (sizeof(type) != (size_t)(expected)) {                                               \
      printf("sizeof(%s) = %lu, golden %lu\n", #type, (unsigned long)sizeof(type),          \
             (unsigned long)(expected));                                                    \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)
#define OFFSET(type, field, expected)                                                       \
  do {                                                                                      \
    if (offsetof(type, field) != (size_t)(expected)) {                                      \
      printf("offsetof(%s, %s) = %lu, golden %lu\n", #type, #field,                        \
             (unsigned long)offsetof(type, field), (unsigned long)(expected));              \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

int main(void) {
  if (sizeof(void*) != 8 || sizeof(size_t) != 8) {
    printf("golden layout is for LP64; skipped\n");
    return 0;
  }
  SIZE(cotune_str, 16);
  OFFSET(cotune_str, data, 0);
  OFFSET(cotune_str, len, 8);
  SIZE(cotune_sink, 24);
  OFFSET(cotune_sink, struct_size, 0);
  OFFSET(cotune_sink, ctx, 8);
  OFFSET(cotune_sink, write, 16);
  SIZE(cotune_error, 40);
  OFFSET(cotune_error, struct_size, 0);
  OFFSET(cotune_error, code, 8);
  OFFSET(cotune_error, message, 16);
  OFFSET(cotune_error, destroy, 32);
  SIZE(cotune_hardware, 296);
  OFFSET(cotune_hardware, struct_size, 0);
  OFFSET(cotune_hardware, gpu_name, 8);
  OFFSET(cotune_hardware, peak_flops, 24);
  OFFSET(cotune_hardware, hbm_bytes, 64);
  OFFSET(cotune_hardware, hbm_bytes_per_s, 72);
  OFFSET(cotune_hardware, net_bytes_per_s, 80);
  OFFSET(cotune_hardware, net_latency_s, 104);
  OFFSET(cotune_hardware, gpus_per_node, 128);
  OFFSET(cotune_hardware, nodes, 132);
  OFFSET(cotune_hardware, nodes_per_island, 136);
  OFFSET(cotune_hardware, reserved0, 140);
  OFFSET(cotune_hardware, kernel_launch_s, 144);
  OFFSET(cotune_hardware, gemm_efficiency_max, 152);
  OFFSET(cotune_hardware, gemm_half_efficiency_flops, 160);
  OFFSET(cotune_hardware, memory_efficiency, 168);
  OFFSET(cotune_hardware, network_efficiency, 176);
  OFFSET(cotune_hardware, price_per_gpu_hour, 184);
  OFFSET(cotune_hardware, host_bytes_per_node, 192);
  OFFSET(cotune_hardware, nvlink_domain, 200);
  OFFSET(cotune_hardware, reserved1, 204);
  OFFSET(cotune_hardware, peak_flops_fp4, 208);
  OFFSET(cotune_hardware, gemm_efficiency_fp8, 216);
  OFFSET(cotune_hardware, gemm_efficiency_fp4, 224);
  OFFSET(cotune_hardware, attention_efficiency, 232);
  OFFSET(cotune_hardware, host_launch_s, 240);
  OFFSET(cotune_hardware, net_efficiency, 248);
  OFFSET(cotune_hardware, exp_per_s, 272);
  OFFSET(cotune_hardware, grouped_gemm_efficiency, 280);
  OFFSET(cotune_hardware, block_scaled_gemm_efficiency, 288);
  SIZE(cotune_op, 168);
  OFFSET(cotune_op, struct_size, 0);
  OFFSET(cotune_op, kind, 8);
  OFFSET(cotune_op, phase, 12);
  OFFSET(cotune_op, stream, 16);
  OFFSET(cotune_op, depends_on, 20);
  OFFSET(cotune_op, dtype, 24);
  OFFSET(cotune_op, collective, 28);
  OFFSET(cotune_op, group, 32);
  OFFSET(cotune_op, net_level, 36);
  OFFSET(cotune_op, flags, 40);
  OFFSET(cotune_op, reserved0, 44);
  OFFSET(cotune_op, count, 48);
  OFFSET(cotune_op, m, 56);
  OFFSET(cotune_op, n, 64);
  OFFSET(cotune_op, k, 72);
  OFFSET(cotune_op, batch, 80);
  OFFSET(cotune_op, heads, 88);
  OFFSET(cotune_op, seq_q, 96);
  OFFSET(cotune_op, seq_kv, 104);
  OFFSET(cotune_op, head_dim, 112);
  OFFSET(cotune_op, bytes, 120);
  OFFSET(cotune_op, group_size, 128);
  OFFSET(cotune_op, measured_s, 136);
  OFFSET(cotune_op, label, 144);
  OFFSET(cotune_op, kernels, 160);
  SIZE(cotune_memory, 48);
  OFFSET(cotune_memory, struct_size, 0);
  OFFSET(cotune_memory, weights, 8);
  OFFSET(cotune_memory, gradients, 16);
  OFFSET(cotune_memory, optimizer, 24);
  OFFSET(cotune_memory, activations, 32);
  OFFSET(cotune_memory, buffers, 40);
  SIZE(cotune_trace, 416);
  OFFSET(cotune_trace, struct_size, 0);
  OFFSET(cotune_trace, ops, 8);
  OFFSET(cotune_trace, num_ops, 16);
  OFFSET(cotune_trace, op_stride, 24);
  OFFSET(cotune_trace, schedule, 32);
  OFFSET(cotune_trace, pipeline_stages, 36);
  OFFSET(cotune_trace, virtual_stages, 40);
  OFFSET(cotune_trace, micro_batches, 44);
  OFFSET(cotune_trace, tokens_per_step, 48);
  OFFSET(cotune_trace, model_flops_per_gpu, 56);
  OFFSET(cotune_trace, gpus, 64);
  OFFSET(cotune_trace, memory, 72);
  OFFSET(cotune_trace, hardware, 120);
  SIZE(cotune_sim_result, 152);
  OFFSET(cotune_sim_result, struct_size, 0);
  OFFSET(cotune_sim_result, step_time_s, 8);
  OFFSET(cotune_sim_result, tokens_per_s, 16);
  OFFSET(cotune_sim_result, tflops_per_gpu, 24);
  OFFSET(cotune_sim_result, mfu, 32);
  OFFSET(cotune_sim_result, peak_memory_bytes, 40);
  OFFSET(cotune_sim_result, fits, 48);
  OFFSET(cotune_sim_result, reserved0, 52);
  OFFSET(cotune_sim_result, compute_s, 56);
  OFFSET(cotune_sim_result, bubble_s, 64);
  OFFSET(cotune_sim_result, optimizer_s, 72);
  OFFSET(cotune_sim_result, exposed_comm_s, 80);
  OFFSET(cotune_sim_result, cost_per_mtokens, 136);
  OFFSET(cotune_sim_result, launch_bound_s, 144);
  SIZE(cotune_host, 80);
  OFFSET(cotune_host, struct_size, 0);
  OFFSET(cotune_host, abi_major, 8);
  OFFSET(cotune_host, abi_minor, 12);
  OFFSET(cotune_host, host_version, 16);
  OFFSET(cotune_host, log, 32);
  OFFSET(cotune_host, error_new, 40);
  OFFSET(cotune_host, json_get_number, 48);
  OFFSET(cotune_host, json_get_string, 56);
  OFFSET(cotune_host, resolve_hardware, 64);
  OFFSET(cotune_host, simulate_trace, 72);
  SIZE(cotune_param, 120);
  OFFSET(cotune_param, struct_size, 0);
  OFFSET(cotune_param, name, 8);
  OFFSET(cotune_param, type, 24);
  OFFSET(cotune_param, flags, 28);
  OFFSET(cotune_param, low, 32);
  OFFSET(cotune_param, high, 40);
  OFFSET(cotune_param, values, 48);
  OFFSET(cotune_param, num_values, 56);
  OFFSET(cotune_param, choices, 64);
  OFFSET(cotune_param, num_choices, 72);
  OFFSET(cotune_param, default_value, 80);
  OFFSET(cotune_param, unit, 88);
  OFFSET(cotune_param, help, 104);
  SIZE(cotune_space_api, 136);
  OFFSET(cotune_space_api, struct_size, 0);
  OFFSET(cotune_space_api, create, 8);
  OFFSET(cotune_space_api, destroy, 16);
  OFFSET(cotune_space_api, describe, 24);
  OFFSET(cotune_space_api, check, 32);
  OFFSET(cotune_space_api, explain, 40);
  OFFSET(cotune_space_api, sample, 48);
  OFFSET(cotune_space_api, describe_features, 56);
  OFFSET(cotune_space_api, featurize, 64);
  OFFSET(cotune_space_api, lower, 72);
  OFFSET(cotune_space_api, render, 80);
  OFFSET(cotune_space_api, parse, 88);
  OFFSET(cotune_space_api, set_target, 96);
  OFFSET(cotune_space_api, metrics, 104);
  OFFSET(cotune_space_api, table_schema, 112);
  OFFSET(cotune_space_api, table_read, 120);
  OFFSET(cotune_space_api, table_write, 128);
  SIZE(cotune_predictor_api, 64);
  OFFSET(cotune_predictor_api, struct_size, 0);
  OFFSET(cotune_predictor_api, create, 8);
  OFFSET(cotune_predictor_api, destroy, 16);
  OFFSET(cotune_predictor_api, fit, 24);
  OFFSET(cotune_predictor_api, predict, 32);
  OFFSET(cotune_predictor_api, save, 40);
  OFFSET(cotune_predictor_api, load, 48);
  OFFSET(cotune_predictor_api, describe_fit, 56);
  SIZE(cotune_search_context, 64);
  OFFSET(cotune_search_context, struct_size, 0);
  OFFSET(cotune_search_context, ctx, 8);
  OFFSET(cotune_search_context, num_params, 16);
  OFFSET(cotune_search_context, sample, 24);
  OFFSET(cotune_search_context, check, 32);
  OFFSET(cotune_search_context, score, 40);
  OFFSET(cotune_search_context, seen, 48);
  OFFSET(cotune_search_context, score_version, 56);
  SIZE(cotune_searcher_api, 56);
  OFFSET(cotune_searcher_api, struct_size, 0);
  OFFSET(cotune_searcher_api, create, 8);
  OFFSET(cotune_searcher_api, destroy, 16);
  OFFSET(cotune_searcher_api, propose, 24);
  OFFSET(cotune_searcher_api, observe, 32);
  OFFSET(cotune_searcher_api, save, 40);
  OFFSET(cotune_searcher_api, load, 48);
  SIZE(cotune_trial, 120);
  OFFSET(cotune_trial, struct_size, 0);
  OFFSET(cotune_trial, trial_id, 8);
  OFFSET(cotune_trial, config_json, 24);
  OFFSET(cotune_trial, launch_args, 40);
  OFFSET(cotune_trial, workload_json, 56);
  OFFSET(cotune_trial, workdir, 72);
  OFFSET(cotune_trial, trace, 88);
  OFFSET(cotune_trial, params, 96);
  OFFSET(cotune_trial, num_params, 104);
  OFFSET(cotune_trial, config, 112);
  SIZE(cotune_trial_result, 80);
  OFFSET(cotune_trial_result, struct_size, 0);
  OFFSET(cotune_trial_result, status, 8);
  OFFSET(cotune_trial_result, attempts, 12);
  OFFSET(cotune_trial_result, metrics_json, 16);
  OFFSET(cotune_trial_result, error, 32);
  OFFSET(cotune_trial_result, log_path, 48);
  OFFSET(cotune_trial_result, external_id, 64);
  SIZE(cotune_executor_api, 96);
  OFFSET(cotune_executor_api, struct_size, 0);
  OFFSET(cotune_executor_api, create, 8);
  OFFSET(cotune_executor_api, destroy, 16);
  OFFSET(cotune_executor_api, capacity, 24);
  OFFSET(cotune_executor_api, submit, 32);
  OFFSET(cotune_executor_api, poll, 40);
  OFFSET(cotune_executor_api, cancel, 48);
  OFFSET(cotune_executor_api, release, 56);
  OFFSET(cotune_executor_api, attach, 64);
  OFFSET(cotune_executor_api, candidates, 72);
  OFFSET(cotune_executor_api, metrics, 80);
  OFFSET(cotune_executor_api, check_study, 88);
  SIZE(cotune_component, 88);
  OFFSET(cotune_component, struct_size, 0);
  OFFSET(cotune_component, kind, 8);
  OFFSET(cotune_component, capabilities, 12);
  OFFSET(cotune_component, id, 16);
  OFFSET(cotune_component, name, 32);
  OFFSET(cotune_component, description, 48);
  OFFSET(cotune_component, version, 64);
  OFFSET(cotune_component, api, 80);
  SIZE(cotune_plugin, 32);
  OFFSET(cotune_plugin, struct_size, 0);
  OFFSET(cotune_plugin, abi_major, 8);
  OFFSET(cotune_plugin, abi_minor, 12);
  OFFSET(cotune_plugin, components, 16);
  OFFSET(cotune_plugin, num_components, 24);
  if (failures == 0) printf("layout: every struct matches the golden table\n");
  return failures == 0 ? 0 : 1;
}
