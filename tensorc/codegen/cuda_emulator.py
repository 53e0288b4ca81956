"""Run generated CUDA C on the CPU: the kernels' own source, compiled by the host C++ compiler.

The emulation header supplies what CUDA C uses: ``threadIdx``/``blockIdx``/``blockDim``/
``gridDim``, ``__shared__`` (one copy per block), ``__syncthreads()``, warp shuffles, the half
and bfloat16 types and conversions, ``float2``/``float4``, the fast-math intrinsics. Each CUDA
thread of a block is a user-level fiber with its own stack; the fibers of a block take turns
on one OS thread, switching only where a thread must wait for the others (a barrier, a
shuffle). Blocks run one after another. A kernel with no barrier runs its threads one by one
without fibers. A barrier counts every thread of the block: if one exits without reaching it,
the launch reports a deadlock (on a GPU: a hang or undefined behaviour).

This is how the tests execute the exact text nvcc would compile without a GPU: wrong
indexing, a missing barrier (a read that would race), a wrong shuffle all show up as wrong
numbers (or, for a barrier some threads skip, as a reported deadlock).

>>> lib = build_emulator(source, {"k0": True})      # kernel name -> uses barriers
>>> lib.launch("k0", grid=(4, 1, 1), block=(256, 1, 1), pointers=[x_ptr, y_ptr])
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tensorc.errors import TensorcError

EMULATION_HEADER = r"""
// tensorc's CPU emulation of the CUDA C that its code generator writes
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <utility>
#include <sys/mman.h>
#include <math.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// --- half and bfloat16 --------------------------------------------------------------------
struct __half { unsigned short x; };
struct __nv_bfloat16 { unsigned short x; };
inline __half __float2half_rn(float f) {
  unsigned int x; memcpy(&x, &f, 4);
  unsigned int sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
  unsigned short h;
  if (mag > 0x7f800000u) h = (unsigned short)(sign | 0x7e00u);
  else if (mag >= 0x477ff000u) h = (unsigned short)(sign | 0x7c00u);
  else if (mag < 0x38800000u) {
    float a; memcpy(&a, &mag, 4);
    h = (unsigned short)(sign | (unsigned int)rintf(a * 16777216.0f));
  } else {
    unsigned int r = mag - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    h = (unsigned short)(sign | (r >> 13));
  }
  return __half{h};
}
inline float __half2float(__half v) {
  unsigned int h = v.x, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
  else if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; memcpy(&x, &f, 4); x |= sign; }
  else x = sign | ((e + 112u) << 23) | (m << 13);
  float f; memcpy(&f, &x, 4); return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned int x; memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((x >> 16) | 0x40u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return __nv_bfloat16{(unsigned short)(x >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 v) {
  unsigned int x = (unsigned int)v.x << 16; float f; memcpy(&f, &x, 4); return f;
}

// --- fast-math intrinsics -----------------------------------------------------------------
#define __expf expf
#define __logf logf
#define __powf powf
#define __sinf sinf
#define __cosf cosf
#define __tanf tanf
#define __fdividef(a, b) ((a) / (b))

// --- threads: fibers on one OS thread -------------------------------------------------------
namespace tc_emu {
struct Fiber { void* sp; uint3 tid; int linear; bool done; char* stack; };
extern thread_local uint3 thread_idx, block_idx;
extern thread_local dim3 block_dim, grid_dim;
}
#define threadIdx (tc_emu::thread_idx)
#define blockIdx (tc_emu::block_idx)
#define blockDim (tc_emu::block_dim)
#define gridDim (tc_emu::grid_dim)

namespace tc_emu {
thread_local uint3 thread_idx, block_idx;
thread_local dim3 block_dim, grid_dim;
static thread_local Fiber* fibers = nullptr;
static thread_local int nfibers = 0, fiber_capacity = 0, current = 0, alive = 0;
static thread_local bool use_fibers = false;
static thread_local void* main_sp = nullptr;
static thread_local const std::function<void()>* body = nullptr;
static thread_local long long progress = 0;
static thread_local int bar_arrived = 0, bar_gen = 0;
static thread_local int warp_arrived[32], warp_gen[32], warp_size[32];
static thread_local unsigned long long warp_slots[32][32];
static const size_t STACK_BYTES = 256 * 1024;

#if defined(__x86_64__)
extern "C" void tc_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl tc_emu_switch
  .type tc_emu_switch, @function
tc_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tc_emu_switch, .-tc_emu_switch
)");

static void fiber_main();

static void fiber_start(Fiber& f) {
  uintptr_t top = ((uintptr_t)(f.stack + STACK_BYTES)) & ~(uintptr_t)15;
  void** sp = (void**)top;
  *--sp = nullptr;                       // fiber_main's return address (never used)
  *--sp = (void*)&fiber_main;            // where tc_emu_switch returns to
  for (int k = 0; k < 6; ++k) *--sp = nullptr;   // rbp rbx r12 r13 r14 r15
  --sp;
  unsigned int mxcsr; unsigned short fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  memcpy((char*)sp, &mxcsr, 4);
  memcpy((char*)sp + 4, &fpucw, 2);
  f.sp = sp;
}
static inline void switch_to_fiber(Fiber& f) { tc_emu_switch(&main_sp, f.sp); }
static inline void switch_to_main(Fiber& f) { tc_emu_switch(&f.sp, main_sp); }
#else
#include <ucontext.h>
static thread_local ucontext_t main_ctx;
static thread_local ucontext_t* fiber_ctx = nullptr;
static void fiber_main();
static void fiber_start(Fiber& f) {
  int k = (int)(&f - fibers);
  getcontext(&fiber_ctx[k]);
  fiber_ctx[k].uc_stack.ss_sp = f.stack;
  fiber_ctx[k].uc_stack.ss_size = STACK_BYTES;
  fiber_ctx[k].uc_link = nullptr;
  makecontext(&fiber_ctx[k], fiber_main, 0);
}
static inline void switch_to_fiber(Fiber& f) { swapcontext(&main_ctx, &fiber_ctx[&f - fibers]); }
static inline void switch_to_main(Fiber& f) { swapcontext(&fiber_ctx[&f - fibers], &main_ctx); }
#endif

static inline void yield_now() { switch_to_main(fibers[current]); }

static void fiber_main() {
  (*body)();
  Fiber& f = fibers[current];
  f.done = true;
  --alive;
  ++progress;
  switch_to_main(f);
  abort();
}

inline void syncthreads() {
  if (!use_fibers) return;
  int gen = bar_gen;
  ++progress;
  // every thread of the block must arrive: one that has exited never will (a deadlock)
  if (++bar_arrived == nfibers) { bar_arrived = 0; ++bar_gen; return; }
  while (bar_gen == gen) yield_now();
}

inline void syncwarp() {
  if (!use_fibers) return;
  int w = fibers[current].linear / 32, gen = warp_gen[w];
  ++progress;
  if (++warp_arrived[w] == warp_size[w]) { warp_arrived[w] = 0; ++warp_gen[w]; return; }
  while (warp_gen[w] == gen) yield_now();
}

template <class T>
T shuffle(T v, int src_lane_of(int lane, int arg, int width), int arg, int width) {
  if (!use_fibers) return v;
  int linear = fibers[current].linear, w = linear / 32, lane = linear % 32;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof(T));
  warp_slots[w][lane] = bits;
  syncwarp();
  int src = src_lane_of(lane, arg, width);
  if (src < 0 || w * 32 + src >= nfibers) src = lane;
  T r;
  bits = warp_slots[w][src];
  memcpy(&r, &bits, sizeof(T));
  syncwarp();
  return r;
}
inline int lane_xor(int lane, int mask, int width) {
  int src = lane ^ mask;
  return (src / width > lane / width) ? lane : src;
}
inline int lane_down(int lane, int delta, int width) {
  int src = lane + delta;
  return (src / width != lane / width) ? lane : src;
}
inline int lane_up(int lane, int delta, int width) {
  int src = lane - delta;
  return (src < (lane / width) * width) ? lane : src;
}
inline int lane_idx(int lane, int src, int width) { return (lane / width) * width + src % width; }

// Run body once per thread of every block; returns 0, or -1 when the threads of a block
// wait for each other forever (a barrier some of them never reach).
inline int launch(const unsigned* dims, const std::function<void()>& fn, bool with_fibers) {
  grid_dim = dim3{dims[0], dims[1], dims[2]};
  block_dim = dim3{dims[3], dims[4], dims[5]};
  int n = (int)(dims[3] * dims[4] * dims[5]);
  body = &fn;
  use_fibers = with_fibers && n > 1;
  if (use_fibers && fiber_capacity < n) {
    for (int k = 0; k < fiber_capacity; ++k) munmap(fibers[k].stack, STACK_BYTES);
    free(fibers);
    fibers = (Fiber*)calloc(n, sizeof(Fiber));
#if !defined(__x86_64__)
    free(fiber_ctx);
    fiber_ctx = (ucontext_t*)calloc(n, sizeof(ucontext_t));
#endif
    for (int k = 0; k < n; ++k)
      fibers[k].stack = (char*)mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    fiber_capacity = n;
  }
  nfibers = n;
  for (unsigned bz = 0; bz < dims[2]; ++bz)
    for (unsigned by = 0; by < dims[1]; ++by)
      for (unsigned bx = 0; bx < dims[0]; ++bx) {
        block_idx = uint3{bx, by, bz};
        if (!use_fibers) {
          for (unsigned tz = 0; tz < dims[5]; ++tz)
            for (unsigned ty = 0; ty < dims[4]; ++ty)
              for (unsigned tx = 0; tx < dims[3]; ++tx) {
                thread_idx = uint3{tx, ty, tz};
                fn();
              }
          continue;
        }
        alive = n;
        bar_arrived = 0;
        for (int w = 0; w < 32; ++w) {
          warp_arrived[w] = 0;
          int left = n - 32 * w;
          warp_size[w] = left >= 32 ? 32 : (left > 0 ? left : 0);
        }
        for (int k = 0; k < n; ++k) {
          Fiber& f = fibers[k];
          f.linear = k;
          f.tid = uint3{(unsigned)(k % dims[3]), (unsigned)((k / dims[3]) % dims[4]),
                        (unsigned)(k / (dims[3] * dims[4]))};
          f.done = false;
          fiber_start(f);
        }
        while (alive > 0) {
          long long before = progress;
          for (int k = 0; k < n; ++k) {
            if (fibers[k].done) continue;
            current = k;
            thread_idx = fibers[k].tid;
            switch_to_fiber(fibers[k]);
          }
          if (progress == before && alive > 0) return -1;
        }
      }
  return 0;
}

template <class... P, size_t... I>
inline void call(void (*f)(P...), void** args, std::index_sequence<I...>) {
  f(static_cast<P>(args[I])...);
}
template <class... P> inline void call(void (*f)(P...), void** args) {
  call(f, args, std::index_sequence_for<P...>{});
}
}  // namespace tc_emu

inline void __syncthreads() { tc_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; tc_emu::syncwarp(); }
inline unsigned __activemask() { return 0xffffffffu; }
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  (void)mask; return tc_emu::shuffle(v, tc_emu::lane_xor, lane_mask, width);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask; return tc_emu::shuffle(v, tc_emu::lane_down, (int)delta, width);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask; return tc_emu::shuffle(v, tc_emu::lane_up, (int)delta, width);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  (void)mask; return tc_emu::shuffle(v, tc_emu::lane_idx, src, width);
}
// one emulated thread runs at a time, so a compare-and-swap is a plain one
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long value) {
  unsigned long long old = *address;
  if (old == compare) *address = value;
  return old;
}
"""

CXX_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-shared", "-fwrapv", "-fno-strict-aliasing",
             "-w")
_LOADED: dict[str, "EmulatedKernels"] = {}


def find_host_compiler() -> str | None:
    """The C++ compiler that builds emulated kernels: $CXX, else g++ or clang++."""
    for name in (os.environ.get("CXX"), "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class EmulatedKernels:
    """Kernels of one CUDA source compiled for the CPU; ``launch`` runs one."""

    def __init__(self, library_path: str, kernels: dict[str, bool]):
        self._lib = ctypes.CDLL(library_path)
        self._launchers = {}
        for name in kernels:
            fn = getattr(self._lib, f"tc_launch_{name}")
            fn.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_void_p)]
            fn.restype = ctypes.c_int
            self._launchers[name] = fn

    def global_address(self, name: str) -> int:
        """The address of the global ``name`` (an ``extern "C"`` one) in the library."""
        return ctypes.addressof(ctypes.c_uint64.in_dll(self._lib, name))

    def launch(self, name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               pointers: list[int]) -> None:
        dims = (ctypes.c_uint * 6)(*grid, *block)
        args = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        if self._launchers[name](dims, args) != 0:
            raise TensorcError(f"emulated kernel {name} deadlocked: the threads of a block "
                               f"wait at a barrier that some of them never reach")


def emulation_source(source: str, kernels: dict[str, bool]) -> str:
    """``source`` with a launcher per kernel: ``int tc_launch_NAME(dims, args)``."""
    parts = [source, "\n// launchers"]
    for name, fibers in kernels.items():
        parts.append(f'extern "C" int tc_launch_{name}(const unsigned* dims, void** args) {{\n'
                     f"  return tc_emu::launch(dims, [args] {{ tc_emu::call({name}, args); }}, "
                     f"{'true' if fibers else 'false'});\n}}")
    return "\n".join(parts) + "\n"


def build_emulator(source: str, kernels: dict[str, bool]) -> EmulatedKernels:
    """Compile ``source`` (generated CUDA C) for the CPU; ``kernels`` maps each kernel's name
    to whether it synchronizes its threads (barriers, shuffles). Built libraries are cached
    by the hash of their text, in this process and in the temporary directory."""
    text = emulation_source(source, kernels)
    key = hashlib.sha256((EMULATION_HEADER + text + " ".join(CXX_FLAGS)).encode()).hexdigest()
    if key in _LOADED:
        return _LOADED[key]
    cache = Path(tempfile.gettempdir()) / "tensorc-emulator"
    cache.mkdir(exist_ok=True)
    library = cache / f"{key[:24]}.so"
    if not library.exists():
        cxx = find_host_compiler()
        if cxx is None:
            raise TensorcError("no C++ compiler to build emulated CUDA kernels with: install "
                               "g++ (or set CXX)")
        with tempfile.TemporaryDirectory(prefix="tensorc-emu-") as tmp:
            tmpdir = Path(tmp)
            (tmpdir / "tc_emulator.h").write_text(EMULATION_HEADER)
            (tmpdir / "cuda_fp16.h").write_text("#pragma once\n")
            (tmpdir / "cuda_bf16.h").write_text("#pragma once\n")
            src = tmpdir / "kernels.cpp"
            src.write_text(text)
            out = tmpdir / "kernels.so"
            cmd = [cxx, *CXX_FLAGS, "-I", str(tmpdir), "-include", "tc_emulator.h",
                   str(src), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise TensorcError(f"the host compiler rejected the generated CUDA source:\n"
                                   f"{proc.stderr[-4000:]}")
            partial = cache / f".{key[:24]}.{os.getpid()}.so"
            shutil.copyfile(out, partial)
            os.replace(partial, library)
    lib = EmulatedKernels(str(library), kernels)
    _LOADED[key] = lib
    return lib
