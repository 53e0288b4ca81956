"""The thread pool that runs parallel loops: ``void tensorc_parallel(fn, closure, team)``.

Compiled kernels call ``tensorc_parallel`` (codegen/llvm/parallel.py); this module
defines it once per process, as LLVM IR that MCJIT compiles when the first module loads, and
makes the symbol visible to the object code linked after it. No C compiler is needed.

Why not libgomp's ``GOMP_parallel``: its region ends in a barrier that waits for every
thread of the team, also for a worker that the OS has not yet scheduled, so on a busy
machine each parallel loop waited for a descheduled worker (ResNet-18: 188 ms at 2 threads
against 39 ms at 1 with one core busy). Here the calling thread never waits for a worker to
*start*: it publishes the job, wakes as many sleeping workers as the team lacks, and takes
chunks itself (the loop body takes chunks from its own range's counter in the closure, then
from the other ranges', until none are left); when it runs out,
it closes the job and waits only for workers that are inside the body, finishing a chunk. A
worker that arrives late finds the job closed and goes back to sleep. Waiting threads spin
for ``SPIN`` time-stamp counter ticks (about 100 us: the next parallel loop of the same
inference comes sooner, after the few small single-threaded kernels in between) and then
sleep on a futex, so they leave the core to whoever needs it.

One job at a time: a second thread that calls ``tensorc_parallel`` while the pool is busy
(two Modules run from two Python threads) runs its loop alone, on its own thread. A forked
child has no workers; its loops run on the calling thread, correctly. On other than
x86-64 Linux, ``tensorc_parallel`` calls libgomp's ``GOMP_parallel`` instead.

>>> install()    # idempotent; NativeLibrary calls it before linking compiled code
"""
from __future__ import annotations

import platform
import sys

# llvmlite (about 0.1 s to import) is imported where code is linked, so that import tensorc
# and the commands that link nothing do not pay for it.

# Time-stamp counter ticks a waiting thread spins before it sleeps (115 us at 2.6 GHz): long
# enough that workers stay awake through single-threaded kernels such as BERT's attention, since
# a worker woken from its futex starts 15-20 us late and delays the caller (measured in e1da0a6).
SPIN = 300_000
MAX_WORKERS = 255    # threads beyond the caller (num_threads is at most 4x the cores)

_engine = None       # the MCJIT engine holding the pool's code (kept alive for the process)

_POOL_IR = r"""
@tc_fn = internal global ptr null
@tc_arg = internal global ptr null
@tc_seq = internal global i32 0          ; bumped for each job: the workers' futex word
@tc_open = internal global i32 0         ; 1 while workers may join the job
@tc_inside = internal global i32 0       ; workers inside the job's body: the caller's futex
@tc_wanted = internal global i32 0       ; places left in the job's team
@tc_busy = internal global i32 0         ; a job is running
@tc_workers = internal global i32 0      ; workers started
@tc_sleepers = internal global i32 0     ; workers asleep on tc_seq
@tc_caller_sleeps = internal global i32 0

declare i64 @syscall(i64, ...)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()

; return once *addr != val: spin for `ticks` ticks, then sleep on the futex (counted in
; *sleepers)
define internal void @tc_wait(ptr %addr, i32 %val, ptr %sleepers, i64 %ticks) nounwind {
entry:
  %start = call i64 @llvm.readcyclecounter()
  br label %spin
spin:
  %cur = load atomic i32, ptr %addr seq_cst, align 4
  %changed = icmp ne i32 %cur, %val
  br i1 %changed, label %done, label %more
more:
  %now = call i64 @llvm.readcyclecounter()
  %spun = sub i64 %now, %start
  %spinning = icmp ult i64 %spun, %ticks
  br i1 %spinning, label %pause, label %sleep
pause:
  call void @llvm.x86.sse2.pause()
  br label %spin
sleep:
  %s0 = atomicrmw add ptr %sleepers, i32 1 seq_cst
  %cur2 = load atomic i32, ptr %addr seq_cst, align 4
  %same = icmp eq i32 %cur2, %val
  br i1 %same, label %futex, label %awake
futex:
  ; futex(addr, FUTEX_WAIT_PRIVATE, val): sleeps unless *addr already changed
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %addr, i32 128, i32 %val,
                                    ptr null, ptr null, i32 0)
  br label %awake
awake:
  %s1 = atomicrmw sub ptr %sleepers, i32 1 seq_cst
  %cur3 = load atomic i32, ptr %addr seq_cst, align 4
  %changed3 = icmp ne i32 %cur3, %val
  br i1 %changed3, label %done, label %sleep
done:
  ret void
}

define internal void @tc_wake(ptr %addr, i32 %count) nounwind {
  ; futex(addr, FUTEX_WAKE_PRIVATE, count)
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %addr, i32 129, i32 %count,
                                    ptr null, ptr null, i32 0)
  ret void
}

define internal ptr @tc_worker(ptr %unused) nounwind {
entry:
  %s0 = load atomic i32, ptr @tc_seq seq_cst, align 4
  br label %loop
loop:
  ; a worker that found no place in the last job's team sleeps at once: the spare workers
  ; of a larger team run earlier (8 threads, then 2) would otherwise spin on the cores the
  ; team needs (ResNet at 2 threads after a run at 8: 5.9 -> 9.3 ms)
  %seen = phi i32 [ %s0, %entry ], [ %s, %next ]
  %budget = phi i64 [ SPIN, %entry ], [ %spin, %next ]
  call void @tc_wait(ptr @tc_seq, i32 %seen, ptr @tc_sleepers, i64 %budget)
  %s = load atomic i32, ptr @tc_seq seq_cst, align 4
  %place = atomicrmw sub ptr @tc_wanted, i32 1 seq_cst
  %may = icmp sgt i32 %place, 0
  br i1 %may, label %join, label %spare
spare:
  br label %next
join:
  %in0 = atomicrmw add ptr @tc_inside, i32 1 seq_cst
  %open = load atomic i32, ptr @tc_open seq_cst, align 4
  %now = load atomic i32, ptr @tc_seq seq_cst, align 4
  %isopen = icmp ne i32 %open, 0
  %same = icmp eq i32 %now, %s
  %ok = and i1 %isopen, %same
  br i1 %ok, label %run, label %leave
run:
  %fn = load atomic ptr, ptr @tc_fn monotonic, align 8
  %arg = load atomic ptr, ptr @tc_arg monotonic, align 8
  call void %fn(ptr %arg)
  br label %leave
leave:
  %left = atomicrmw sub ptr @tc_inside, i32 1 seq_cst
  %last = icmp eq i32 %left, 1
  br i1 %last, label %check, label %next
check:
  %sleeps = load atomic i32, ptr @tc_caller_sleeps seq_cst, align 4
  %asleep = icmp ne i32 %sleeps, 0
  br i1 %asleep, label %wake, label %next
wake:
  call void @tc_wake(ptr @tc_inside, i32 1)
  br label %next
next:
  %spin = phi i64 [ 0, %spare ], [ SPIN, %leave ], [ SPIN, %check ], [ SPIN, %wake ]
  br label %loop
}

; start workers until there are `want` (at most MAX_WORKERS); the caller holds tc_busy
define internal void @tc_grow(i32 %want) nounwind {
entry:
  %tid = alloca i64, align 8
  %cap = icmp slt i32 %want, MAX_WORKERS
  %target = select i1 %cap, i32 %want, i32 MAX_WORKERS
  br label %head
head:
  %have = load i32, ptr @tc_workers, align 4
  %enough = icmp sge i32 %have, %target
  br i1 %enough, label %done, label %spawn
spawn:
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @tc_worker, ptr null)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %done, label %started
started:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  %have1 = add i32 %have, 1
  store i32 %have1, ptr @tc_workers, align 4
  br label %head
done:
  ret void
}

define void @tensorc_parallel(ptr %fn, ptr %arg, i32 %team) nounwind {
entry:
  %helpers = sub i32 %team, 1
  %alone = icmp slt i32 %helpers, 1
  br i1 %alone, label %serial, label %try
try:
  %cas = cmpxchg ptr @tc_busy, i32 0, i32 1 seq_cst seq_cst
  %got = extractvalue { i32, i1 } %cas, 1
  br i1 %got, label %start, label %serial
serial:
  call void %fn(ptr %arg)
  ret void
start:
  call void @tc_grow(i32 %helpers)
  store atomic ptr %fn, ptr @tc_fn monotonic, align 8
  store atomic ptr %arg, ptr @tc_arg monotonic, align 8
  store atomic i32 %helpers, ptr @tc_wanted seq_cst, align 4
  store atomic i32 1, ptr @tc_open seq_cst, align 4
  %old = atomicrmw add ptr @tc_seq, i32 1 seq_cst
  ; wake only as many sleepers as the awake (spinning) workers leave places for: each
  ; woken spare costs a context switch on a core the team needs (after a run at 8 threads,
  ; 7 workers: ResNet-10 at 2 threads 7.0 -> 7.6 ms when every job woke one). A worker
  ; that falls asleep after this count sees tc_seq changed in its futex wait and stays up
  %sleepers = load atomic i32, ptr @tc_sleepers seq_cst, align 4
  %workers = load i32, ptr @tc_workers, align 4
  %awake = sub i32 %workers, %sleepers
  %need = sub i32 %helpers, %awake
  %anyone = icmp sgt i32 %need, 0
  br i1 %anyone, label %wake, label %work
wake:
  call void @tc_wake(ptr @tc_seq, i32 %need)
  br label %work
work:
  call void %fn(ptr %arg)
  store atomic i32 0, ptr @tc_open seq_cst, align 4
  br label %drain
drain:
  %in = load atomic i32, ptr @tc_inside seq_cst, align 4
  %empty = icmp eq i32 %in, 0
  br i1 %empty, label %end, label %waitin
waitin:
  call void @tc_wait(ptr @tc_inside, i32 %in, ptr @tc_caller_sleeps, i64 SPIN)
  br label %drain
end:
  store atomic i32 0, ptr @tc_busy seq_cst, align 4
  ret void
}
"""

_GOMP_IR = r"""
declare void @GOMP_parallel(ptr, ptr, i32, i32)

define void @tensorc_parallel(ptr %fn, ptr %arg, i32 %team) nounwind {
  call void @GOMP_parallel(ptr %fn, ptr %arg, i32 %team, i32 0)
  ret void
}
"""


def _has_own_pool() -> bool:
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def pool_ir() -> str:
    """The LLVM IR of ``tensorc_parallel`` for this machine."""
    if _has_own_pool():
        return (_POOL_IR.replace("SPIN", str(SPIN))
                .replace("MAX_WORKERS", str(MAX_WORKERS)))
    return _GOMP_IR


def install() -> None:
    """Compile the pool and make ``tensorc_parallel`` resolvable by code linked later."""
    global _engine
    if _engine is not None:
        return
    import llvmlite.binding as llvm
    module = llvm.parse_assembly(pool_ir())
    module.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    llvm.add_symbol("tensorc_parallel", engine.get_function_address("tensorc_parallel"))
    _engine = engine
