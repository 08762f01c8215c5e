// cuBLASLt GEMM timing (see gemm_timer.hpp).
#include "gemm_timer.hpp"

#include "kernels.hpp"

#include <cublas_v2.h>

#include <stdexcept>
#include <string>

namespace cotune_cuda {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

// Releases cuBLASLt descriptors on every path.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct GemmTypes {
  cudaDataType_t in, out;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case COTUNE_DTYPE_TF32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case COTUNE_DTYPE_BF16: return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case COTUNE_DTYPE_FP16: return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case COTUNE_DTYPE_FP8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default: throw std::invalid_argument("GEMM: unknown dtype " + std::to_string(dtype));
  }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace

void check_cublas(int status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + ": " + cublasGetStatusName(static_cast<cublasStatus_t>(status)) +
                             " (" + cublasGetStatusString(static_cast<cublasStatus_t>(status)) + ")");
}

GemmTimer::GemmTimer(cudaStream_t stream, const TimingOptions& options)
    : stream_(stream), options_(options), workspace_(kWorkspaceBytes) {
  check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
}

GemmTimer::~GemmTimer() {
  if (handle_) cublasLtDestroy(handle_);
}

double GemmTimer::time(const Measurement& g) {
  const GemmTypes t = gemm_types(g.dtype);
  // fp8 tensor-core GEMMs need m and k (the leading dimensions of the TN operands) in multiples
  // of 16; the padding is at most 15 rows.
  const int64_t m = g.dtype == COTUNE_DTYPE_FP8 ? round_up(g.m, 16) : g.m;
  const int64_t k = g.dtype == COTUNE_DTYPE_FP8 ? round_up(g.k, 16) : g.k;
  const int64_t n = g.n;
  const size_t in_bytes = static_cast<size_t>(dtype_bytes(g.dtype));
  const size_t out_bytes = g.dtype == COTUNE_DTYPE_FP8 ? 2 : in_bytes;

  DeviceBuffer a(size_t(m) * size_t(k) * in_bytes), b(size_t(k) * size_t(n) * in_bytes),
      d(size_t(m) * size_t(n) * out_bytes);
  check_cuda(launch_fill(g.dtype, a.get(), size_t(m) * size_t(k), 1, stream_), "fill A");
  check_cuda(launch_fill(g.dtype, b.get(), size_t(k) * size_t(n), 2, stream_), "fill B");

  LtDescriptors desc;
  check_cublas(cublasLtMatmulDescCreate(&desc.op, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
  // Column-major: A is k x m (used transposed), B is k x n, D is m x n.
  check_cublas(cublasLtMatrixLayoutCreate(&desc.a, t.in, uint64_t(k), uint64_t(m), k), "cublasLtMatrixLayoutCreate(A)");
  check_cublas(cublasLtMatrixLayoutCreate(&desc.b, t.in, uint64_t(k), uint64_t(n), k), "cublasLtMatrixLayoutCreate(B)");
  check_cublas(cublasLtMatrixLayoutCreate(&desc.d, t.out, uint64_t(m), uint64_t(n), m), "cublasLtMatrixLayoutCreate(D)");
  check_cublas(cublasLtMatmulPreferenceCreate(&desc.pref), "cublasLtMatmulPreferenceCreate");
  const size_t ws = workspace_.bytes();
  check_cublas(cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(handle_, desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref, 1,
                                              &heuristic, &found),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for the GEMM " + g.key() + " on this GPU");

  const float alpha = 1.0f, beta = 0.0f;
  return median_seconds(stream_, options_, [&] {
    check_cublas(cublasLtMatmul(handle_, desc.op, &alpha, a.get(), desc.a, b.get(), desc.b, &beta, d.get(), desc.d,
                                d.get(), desc.d, &heuristic.algo, workspace_.get(), workspace_.bytes(), stream_),
                 "cublasLtMatmul");
  });
}

}  // namespace cotune_cuda
