// Unfused attention timing with cuBLAS strided-batched GEMMs (see attention_timer.hpp).
//
// Per head, column-major: Q, O, dO, dQ are d x sq; K, V, dK, dV are d x skv; the scores S, P and
// dS are skv x sq, so each query's row of keys is contiguous for the softmax kernels.
#include "attention_timer.hpp"

#include "device_buffer.hpp"
#include "gemm_timer.hpp"
#include "kernels.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace cotune_cuda {
namespace {

struct BatchedTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

BatchedTypes batched_types(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case COTUNE_DTYPE_TF32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case COTUNE_DTYPE_BF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case COTUNE_DTYPE_FP16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    default: throw std::invalid_argument("attention: unsupported dtype " + std::string(dtype_name(dtype)));
  }
}

}  // namespace

AttentionTimer::AttentionTimer(cudaStream_t stream, const TimingOptions& options) : stream_(stream), options_(options) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  cublasStatus_t s = cublasSetStream(handle_, stream_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle_);
    handle_ = nullptr;
    check_cublas(s, "cublasSetStream");
  }
}

AttentionTimer::~AttentionTimer() {
  if (handle_) cublasDestroy(handle_);
}

double AttentionTimer::time(const Measurement& m) {
  const BatchedTypes t = batched_types(m.dtype);
  const size_t e = static_cast<size_t>(dtype_bytes(m.dtype));
  const int h = static_cast<int>(m.heads), sq = static_cast<int>(m.seq_q), skv = static_cast<int>(m.seq_kv),
            d = static_cast<int>(m.head_dim);
  const long long q_stride = (long long)d * sq, kv_stride = (long long)d * skv, s_stride = (long long)skv * sq;
  const size_t q_elems = size_t(h) * size_t(q_stride), kv_elems = size_t(h) * size_t(kv_stride),
               s_elems = size_t(h) * size_t(s_stride);
  const bool backward = m.kind == MeasureKind::kAttentionBackward;

  DeviceBuffer q(q_elems * e), k(kv_elems * e), v(kv_elems * e), o(q_elems * e), p(s_elems * e);
  DeviceBuffer d_o, d_q, d_k, d_v, d_s;
  check_cuda(launch_fill(m.dtype, q.get(), q_elems, 11, stream_), "fill Q");
  check_cuda(launch_fill(m.dtype, k.get(), kv_elems, 12, stream_), "fill K");
  check_cuda(launch_fill(m.dtype, v.get(), kv_elems, 13, stream_), "fill V");
  check_cuda(launch_fill(m.dtype, p.get(), s_elems, 14, stream_), "fill P");
  if (backward) {
    d_o = DeviceBuffer(q_elems * e);
    d_q = DeviceBuffer(q_elems * e);
    d_k = DeviceBuffer(kv_elems * e);
    d_v = DeviceBuffer(kv_elems * e);
    d_s = DeviceBuffer(s_elems * e);
    check_cuda(launch_fill(m.dtype, d_o.get(), q_elems, 15, stream_), "fill dO");
  }

  const float scale = 1.0f / std::sqrt(float(d)), one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int gm, int gn, int gk, const float* alpha,
                  const void* a, int lda, long long sa, const void* b, int ldb, long long sb, void* c, int ldc,
                  long long sc, const char* what) {
    check_cublas(cublasGemmStridedBatchedEx(handle_, ta, tb, gm, gn, gk, alpha, a, t.data, lda, sa, b, t.data, ldb, sb,
                                            &zero, c, t.data, ldc, sc, h, t.compute, CUBLAS_GEMM_DEFAULT),
                 what);
  };
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  auto forward = [&] {
    gemm(T, N, skv, sq, d, &scale, k.get(), d, kv_stride, q.get(), d, q_stride, p.get(), skv, s_stride, "S = K^T Q");
    check_cuda(launch_softmax_forward(m.dtype, p.get(), size_t(h) * sq, skv, stream_), "softmax");
    gemm(N, N, d, sq, skv, &one, v.get(), d, kv_stride, p.get(), skv, s_stride, o.get(), d, q_stride, "O = V P");
  };
  auto backward_pass = [&] {
    gemm(N, T, d, skv, sq, &one, d_o.get(), d, q_stride, p.get(), skv, s_stride, d_v.get(), d, kv_stride, "dV = dO P^T");
    gemm(T, N, skv, sq, d, &one, v.get(), d, kv_stride, d_o.get(), d, q_stride, d_s.get(), skv, s_stride, "dP = V^T dO");
    check_cuda(launch_softmax_backward(m.dtype, p.get(), d_s.get(), size_t(h) * sq, skv, stream_), "softmax backward");
    gemm(N, N, d, sq, skv, &scale, k.get(), d, kv_stride, d_s.get(), skv, s_stride, d_q.get(), d, q_stride, "dQ = K dS");
    gemm(N, T, d, skv, sq, &scale, q.get(), d, q_stride, d_s.get(), skv, s_stride, d_k.get(), d, kv_stride,
         "dK = Q dS^T");
  };
  if (backward) return median_seconds(stream_, options_, backward_pass);
  return median_seconds(stream_, options_, forward);
}

}  // namespace cotune_cuda
