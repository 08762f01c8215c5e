// libcotune-executor-process.so: runs trials as local processes (see process_executor.hpp).
#include <cotune/cotune.hpp>

#include "process_executor.hpp"

COTUNE_PLUGIN(cotune::executor<cotune_process::ProcessExecutor>(
    {"org.cotune.executor.process", "process",
     "Runs each trial as a local process from an argv template, with a timeout, a process-group kill, "
     "GPU pinning and metrics from a result file or stdout.", "1.0.0"}))
