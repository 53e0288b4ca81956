"""The CPU emulator of CUDA C itself, on hand-written kernels: thread and block indices,
shared memory per block, barriers, the four warp shuffles (with widths), the deadlock it
reports for a barrier some threads skip, and half / bfloat16 conversions bit for bit against
numpy and ml_dtypes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tensorc.codegen.cuda_emulator import build_emulator
from tensorc.errors import TensorcError

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void indices(int* out) {
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int b = blockIdx.x + gridDim.x * blockIdx.y;
  int n = blockDim.x * blockDim.y * blockDim.z;
  out[b * n + t] = b * 1000 + t;
}
// reverse each block's chunk through shared memory: wrong without the barrier
extern "C" __global__ void reverse(const float* in, float* out) {
  __shared__ float tile[64];
  int t = threadIdx.x, base = blockIdx.x * 64;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[63 - t];
}
extern "C" __global__ void shuffles(const int* in, int* out) {
  int t = threadIdx.x, v = in[t];
  out[0 * 64 + t] = __shfl_xor_sync(0xffffffffu, v, 1);
  out[1 * 64 + t] = __shfl_down_sync(0xffffffffu, v, 3);
  out[2 * 64 + t] = __shfl_up_sync(0xffffffffu, v, 2, 8);
  out[3 * 64 + t] = __shfl_sync(0xffffffffu, v, 5, 16);
}
extern "C" __global__ void skipped_barrier(float* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.0f;
}
extern "C" __global__ void halves(const unsigned short* bits, const float* x, float* h2f,
                                  unsigned short* f2h, unsigned short* f2bf) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __half h; memcpy(&h, &bits[i], 2);
  h2f[i] = __half2float(h);
  __half r = __float2half_rn(x[i]); memcpy(&f2h[i], &r, 2);
  __nv_bfloat16 b = __float2bfloat16_rn(x[i]); memcpy(&f2bf[i], &b, 2);
}
"""
SYNCS = {"indices": False, "reverse": True, "shuffles": True, "skipped_barrier": True,
         "halves": False}


@pytest.fixture(scope="module")
def lib():
    return build_emulator(SOURCE, SYNCS)


def ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def test_thread_and_block_indices(lib) -> None:
    out = np.full(6 * 24, -1, np.int32)
    lib.launch("indices", (3, 2, 1), (4, 3, 2), [ptr(out)])
    want = np.array([b * 1000 + t for b in range(6) for t in range(24)], np.int32)
    np.testing.assert_array_equal(out, want)


def test_shared_memory_and_barriers(lib) -> None:
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    lib.launch("reverse", (4, 1, 1), (64, 1, 1), [ptr(x), ptr(out)])
    np.testing.assert_array_equal(out, x.reshape(4, 64)[:, ::-1].reshape(-1))


def test_warp_shuffles(lib) -> None:
    v = np.arange(64, dtype=np.int32) * 10
    out = np.zeros(4 * 64, np.int32)
    lib.launch("shuffles", (1, 1, 1), (64, 1, 1), [ptr(v), ptr(out)])
    lane = np.arange(64) % 32
    warp = np.arange(64) // 32 * 32
    xor = warp + (lane ^ 1)
    down = np.where(lane + 3 < 32, np.arange(64) + 3, np.arange(64))
    up = np.where(lane % 8 >= 2, np.arange(64) - 2, np.arange(64))
    idx = warp + lane // 16 * 16 + 5
    for k, src in enumerate((xor, down, up, idx)):
        np.testing.assert_array_equal(out[k * 64:(k + 1) * 64], v[src], err_msg=str(k))


def test_a_barrier_some_threads_skip_is_reported(lib) -> None:
    out = np.zeros(32, np.float32)
    with pytest.raises(TensorcError, match="deadlocked: the threads of a block wait at a "
                                           "barrier that some of them never reach"):
        lib.launch("skipped_barrier", (1, 1, 1), (32, 1, 1), [ptr(out)])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # numpy on the infinities and NaNs
def test_half_and_bfloat16_conversions_match_numpy(lib) -> None:
    n = 1 << 16
    bits = np.arange(n, dtype=np.uint16)
    rng = np.random.default_rng(0)
    x = np.concatenate([
        bits.view(np.float16).astype(np.float32),            # every half exactly
        (bits.view(np.float16).astype(np.float32)
         * np.float32(1 + 2 ** -11)),                         # halfway and nearby cases
        rng.standard_normal(n).astype(np.float32) * 1e3,
        np.array([65504, 65520, 65519.99, 1e-8, -6e-8, 3e-5, np.inf, -np.inf, np.nan],
                 np.float32)])
    x = x[:len(x) // 256 * 256]
    bits_in = np.resize(bits, len(x))
    h2f, f2h, f2bf = (np.zeros(len(x), np.float32), np.zeros(len(x), np.uint16),
                      np.zeros(len(x), np.uint16))
    lib.launch("halves", (len(x) // 256, 1, 1), (256, 1, 1),
               [ptr(bits_in), ptr(x), ptr(h2f), ptr(f2h), ptr(f2bf)])
    np.testing.assert_array_equal(h2f.view(np.uint32),
                                  bits_in.view(np.float16).astype(np.float32).view(np.uint32))
    want_h = x.astype(np.float16)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(f2h[finite], want_h.view(np.uint16)[finite])
    assert np.isnan(f2h.view(np.float16)[~finite]).all()
    want_bf = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(f2bf[finite], want_bf.view(np.uint16)[finite])
    assert np.isnan(f2bf.view(ml_dtypes.bfloat16)[~finite].astype(np.float32)).all()
