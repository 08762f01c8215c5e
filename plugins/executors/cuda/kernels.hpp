// The few kernels cuBLAS does not provide: operand fill, the bandwidth copy, and the softmax of the
// unfused attention sequence. Implemented in kernels.cu (nvcc); each returns the launch's error.
#ifndef COTUNE_CUDA_KERNELS_HPP_
#define COTUNE_CUDA_KERNELS_HPP_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cotune_cuda {

// Fills `count` elements of `dtype` (COTUNE_DTYPE_*) with pseudo-random values in [-1, 1), so that
// timings are not those of all-zero operands.
cudaError_t launch_fill(int32_t dtype, void* data, size_t count, uint32_t seed, cudaStream_t stream);

// Copies `bytes` from src to dst (16-byte vectors plus a byte tail): a pure bandwidth kernel.
cudaError_t launch_copy(const void* src, void* dst, size_t bytes, cudaStream_t stream);

// Row-wise softmax in place over `rows` rows of `cols` contiguous elements (fp32 accumulation).
cudaError_t launch_softmax_forward(int32_t dtype, void* scores, size_t rows, size_t cols, cudaStream_t stream);

// Softmax backward: grad <- p * (grad - rowsum(grad * p)), in place over grad.
cudaError_t launch_softmax_backward(int32_t dtype, const void* p, void* grad, size_t rows, size_t cols,
                                    cudaStream_t stream);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_KERNELS_HPP_
