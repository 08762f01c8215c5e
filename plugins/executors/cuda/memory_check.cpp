// The peak-memory check (see memory_check.hpp).
#include "memory_check.hpp"

#include "device.hpp"

#include <cuda_runtime.h>

#include <cstdio>

namespace cotune_cuda {
namespace {
std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  return buf;
}
}  // namespace

FitResult check_memory_fits(double peak_bytes, double reserve_bytes) {
  FitResult r;
  r.needed_bytes = peak_bytes + reserve_bytes;
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  r.free_bytes = double(free_bytes);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(r.needed_bytes));
  if (e == cudaSuccess) {
    check_cuda(cudaFree(p), "cudaFree");
    r.fits = true;
    return r;
  }
  if (e != cudaErrorMemoryAllocation) check_cuda(e, "cudaMalloc (peak memory)");
  cudaGetLastError();  // the allocation failure is not sticky; clear it
  r.message = "needs " + gib(r.needed_bytes) + " (peak " + gib(peak_bytes) + " + reserve " + gib(reserve_bytes) +
              ") but cudaMalloc failed with " + cuda_error_text(e) + "; " + gib(r.free_bytes) + " of " +
              gib(double(total_bytes)) + " free";
  return r;
}

}  // namespace cotune_cuda
