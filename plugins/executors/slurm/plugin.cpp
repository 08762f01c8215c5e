// libcotune-executor-slurm.so: runs trials as Slurm batch jobs (see slurm_executor.hpp).
#include <cotune/cotune.hpp>

#include "slurm_executor.hpp"

COTUNE_PLUGIN(cotune::executor<cotune_slurm::SlurmExecutor>(
    {"org.cotune.executor.slurm", "slurm",
     "Submits trials to a Slurm cluster with sbatch (several at once as a job array), follows them with "
     "squeue/sacct, maps Slurm states to statuses, resubmits after node failure and re-attaches on resume.", "1.0.0"}))
