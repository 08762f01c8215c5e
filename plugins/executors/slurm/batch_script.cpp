#include "batch_script.hpp"


namespace cotune_slurm {

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string sbatch_header(const SlurmOptions& o) {
  std::string h = "#!/bin/bash\n";
  auto line = [&h](const std::string& option) { h += "#SBATCH " + option + "\n"; };
  line("--job-name=" + o.job_name);
  if (!o.partition.empty()) line("--partition=" + o.partition);
  if (!o.account.empty()) line("--account=" + o.account);
  if (!o.qos.empty()) line("--qos=" + o.qos);
  line("--nodes=" + std::to_string(o.nodes));
  if (o.gpus_per_node > 0) line("--gpus-per-node=" + std::to_string(o.gpus_per_node));
  if (o.cpus_per_task > 0) line("--cpus-per-task=" + std::to_string(o.cpus_per_task));
  if (!o.mem.empty()) line("--mem=" + o.mem);
  if (!o.time_limit.empty()) line("--time=" + o.time_limit);
  line("--no-requeue");  // cotune resubmits after NODE_FAIL/PREEMPTED itself, counting attempts
  for (const std::string& s : o.sbatch_options) line(s);
  return h;
}

std::string render_batch_script(const SlurmOptions& o, const std::vector<const TrialCommand*>& trials,
                                const std::string& slurm_output) {
  std::string s = sbatch_header(o);
  s += "#SBATCH --output=" + slurm_output + "\n";
  if (trials.size() > 1) s += "#SBATCH --array=0-" + std::to_string(trials.size() - 1) + "\n";
  s += "# Written by cotune's slurm executor.\n";
  for (const auto& [k, v] : o.env) s += "export " + k + "=" + shell_quote(v) + "\n";
  for (const std::string& line : o.setup) s += line + "\n";
  s += "case \"${SLURM_ARRAY_TASK_ID:-0}\" in\n";
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialCommand& t = *trials[i];
    const std::string dir = shell_quote(t.workdir);
    s += std::to_string(i) + ")\n";
    s += "  cd " + dir + " || exit 1\n";
    s += "  rm -f " + shell_quote(t.workdir + "/" + kExitStatusName) + "\n";
    for (const auto& [k, v] : t.env) s += "  export " + k + "=" + shell_quote(v) + "\n";
    s += " ";
    for (const std::string& a : t.argv) s += " " + shell_quote(a);
    s += " >" + shell_quote(t.workdir + "/" + kStdoutName) + " 2>" + shell_quote(t.workdir + "/" + kStderrName) + "\n";
    s += "  rc=$?\n";
    s += "  ;;\n";
  }
  s += "*)\n  echo \"cotune: no trial for array task $SLURM_ARRAY_TASK_ID\" >&2\n  exit 2\n  ;;\n";
  s += "esac\n";
  s += "echo \"$rc ${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+_$SLURM_ARRAY_TASK_ID}\" > "
       "\"$COTUNE_WORKDIR/" + std::string(kExitStatusName) + "\"\n";
  s += "exit $rc\n";
  return s;
}

}  // namespace cotune_slurm
