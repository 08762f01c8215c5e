// The cuda executor plugin's entry point.
#include "cuda_executor.hpp"

#include <cotune/cotune.hpp>

COTUNE_PLUGIN(cotune::executor<cotune_cuda::CudaExecutor>(
    {"org.cotune.executor.cuda", "cuda",
     "Measures a trial's compute ops (cuBLAS GEMMs, attention, bandwidth kernels) on the local GPU and lets "
     "the performance model add communication.", "1.0.0",
     COTUNE_CAP_NEEDS_TRACE}))
