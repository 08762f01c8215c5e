// Fill, copy and softmax kernels (see kernels.hpp).
#include "kernels.hpp"

#include <cotune/cotune.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace cotune_cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_float(float v);
template <> __device__ inline float from_float<float>(float v) { return v; }
template <> __device__ inline __half from_float<__half>(float v) { return __float2half(v); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ inline __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float v) { return __nv_fp8_e4m3(v); }

template <class T>
__global__ void fill_kernel(T* data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;  // integer hash
    h ^= h >> 16;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = from_float<T>(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

__global__ void copy_vectors(const uint4* src, uint4* dst, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy_bytes(const unsigned char* src, unsigned char* dst, size_t count) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < count) dst[i] = src[i];
}

// Block-wide sum or max of one value per thread.
template <bool kMax>
__device__ float block_reduce(float v) {
  __shared__ float shared[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) v = kMax ? fmaxf(v, shared[w]) : v + shared[w];
  __syncthreads();
  return v;
}

template <class T>
__global__ void softmax_forward(T* scores, size_t cols) {
  T* row = scores + blockIdx.x * cols;
  float m = -INFINITY;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) m = fmaxf(m, to_float(row[j]));
  m = block_reduce<true>(m);
  float s = 0;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) s += __expf(to_float(row[j]) - m);
  s = block_reduce<false>(s);
  const float inv = 1.0f / s;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) row[j] = from_float<T>(__expf(to_float(row[j]) - m) * inv);
}

template <class T>
__global__ void softmax_backward(const T* p, T* grad, size_t cols) {
  const T* prow = p + blockIdx.x * cols;
  T* grow = grad + blockIdx.x * cols;
  float dot = 0;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) dot += to_float(prow[j]) * to_float(grow[j]);
  dot = block_reduce<false>(dot);
  for (size_t j = threadIdx.x; j < cols; j += kThreads)
    grow[j] = from_float<T>(to_float(prow[j]) * (to_float(grow[j]) - dot));
}

unsigned grid_for(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return unsigned(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

// Launches one row per block; grids are limited to 2^31 - 1 blocks in x.
template <class Launch>
cudaError_t per_row(size_t rows, Launch launch) {
  const size_t max_rows = 0x7fffffff;
  for (size_t first = 0; first < rows; first += max_rows) {
    const size_t n = rows - first < max_rows ? rows - first : max_rows;
    launch(first, unsigned(n));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fill(int32_t dtype, void* data, size_t count, uint32_t seed, cudaStream_t stream) {
  const unsigned grid = grid_for(count);
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(data), count, seed); break;
    case COTUNE_DTYPE_BF16:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
      break;
    case COTUNE_DTYPE_FP16: fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(data), count, seed); break;
    case COTUNE_DTYPE_FP8:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), count, seed);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_copy(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  const size_t vectors = bytes / sizeof(uint4);
  if (vectors > 0)
    copy_vectors<<<grid_for(vectors), kThreads, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst),
                                                             vectors);
  const size_t tail = bytes - vectors * sizeof(uint4);
  if (tail > 0)
    copy_bytes<<<1, kThreads, 0, stream>>>(static_cast<const unsigned char*>(src) + vectors * sizeof(uint4),
                                           static_cast<unsigned char*>(dst) + vectors * sizeof(uint4), tail);
  return cudaGetLastError();
}

template <class T>
static cudaError_t softmax_forward_typed(void* scores, size_t rows, size_t cols, cudaStream_t stream) {
  return per_row(rows, [&](size_t first, unsigned n) {
    softmax_forward<T><<<n, kThreads, 0, stream>>>(static_cast<T*>(scores) + first * cols, cols);
  });
}

template <class T>
static cudaError_t softmax_backward_typed(const void* p, void* grad, size_t rows, size_t cols, cudaStream_t stream) {
  return per_row(rows, [&](size_t first, unsigned n) {
    softmax_backward<T><<<n, kThreads, 0, stream>>>(static_cast<const T*>(p) + first * cols,
                                                    static_cast<T*>(grad) + first * cols, cols);
  });
}

cudaError_t launch_softmax_forward(int32_t dtype, void* scores, size_t rows, size_t cols, cudaStream_t stream) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: return softmax_forward_typed<float>(scores, rows, cols, stream);
    case COTUNE_DTYPE_BF16: return softmax_forward_typed<__nv_bfloat16>(scores, rows, cols, stream);
    case COTUNE_DTYPE_FP16: return softmax_forward_typed<__half>(scores, rows, cols, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_softmax_backward(int32_t dtype, const void* p, void* grad, size_t rows, size_t cols,
                                    cudaStream_t stream) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: return softmax_backward_typed<float>(p, grad, rows, cols, stream);
    case COTUNE_DTYPE_BF16: return softmax_backward_typed<__nv_bfloat16>(p, grad, rows, cols, stream);
    case COTUNE_DTYPE_FP16: return softmax_backward_typed<__half>(p, grad, rows, cols, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace cotune_cuda
