"""Two LLVM intrinsics for numba kernels, each with a plain fallback chosen once on import.

``prefetch(array, i)`` asks the CPU to start loading the cache line holding ``array[i]`` (read, kept in
every level). A hint only: it reads nothing, so it can never change a result, and an index past the end
is harmless (no load happens). Built on LLVM's ``llvm.prefetch``; should that fail to compile under some
numba / llvmlite (checked by compiling a probe), ``prefetch`` is a no-op and ``PREFETCH`` is False: slower
on sparse gathers, never different.

``max64(arr, start)``: max(0, the 64 doubles arr[start:start + 64]), as <8 x double> maxima reduced pairwise
and one horizontal maximum -- what the dense selection and the tiles' offer ask of every block of an
accumulator (``chitragupta.kernels._tiles._span_max``). numba keeps a running maximum scalar (nothing
vectorizes its ``max``): the SIMD form is several times faster per value on AVX-512. A maximum is
exact in any order, and accumulators hold no NaN and no -0.0, so it is the loop's value, bit for bit; the
loop is the fallback (``MAX64_SIMD`` False) should it fail to compile or disagree on the probe.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["prefetch", "PREFETCH", "max64", "MAX64_SIMD"]


def _item_pointer(context, builder, signature, args):
    """The address of array args[0]'s element args[1] (no wraparound, no bounds check: the caller's promise)."""
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False, boundscheck=False)


@intrinsic
def _llvm_prefetch(typingctx, arr, idx):
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ptr = _item_pointer(context, builder, signature, args)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        # (address, 0 = read, 3 = keep in all cache levels, 1 = data cache)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def _noop(arr, idx):
    pass


@njit(cache=True)
def _probe(a):
    for i in range(a.shape[0]):
        _llvm_prefetch(a, i)
    return a.shape[0]


def _choose():
    try:
        _probe(np.zeros(4, dtype=np.float64))
        return _llvm_prefetch, True
    except Exception:  # noqa: BLE001 -- any compile failure means: no prefetch, same results
        return _noop, False


prefetch, PREFETCH = _choose()


# -- the maximum of 64 doubles, as SIMD ----------------------------------------------------------------------


@intrinsic
def _llvm_max64(typingctx, arr, start):
    """max(0, max of arr[start:start + 64]) (a C-contiguous float64 array; the caller keeps the span in
    bounds): eight <8 x double> loads and a zero vector reduced pairwise, then across the lanes by halves.

    Each step is ``select(a > b, a, b)``, which x86 lowers to one ``maxpd`` (``llvm.maxnum``'s NaN rule
    costs a compare and a blend more per step), and the pairwise tree is 4 steps deep where a running
    maximum is 8 (1.6x faster per block than the maxnum chain; 1M documents, k = 100: ~3% of the kernel).
    With no NaN in the span the maximum is the same value whatever the order."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"
            and isinstance(start, types.Integer)):
        return None
    sig = types.float64(arr, start)

    def codegen(context, builder, signature, args):
        ptr = _item_pointer(context, builder, signature, args)
        vty = ir.VectorType(ir.DoubleType(), 8)
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vptr = builder.bitcast(ptr, vty.as_pointer())

        def larger(a, b):
            return builder.select(builder.fcmp_ordered(">", a, b), a, b)

        vs = [builder.load(builder.gep(vptr, [ir.Constant(i64, j)]), align=8) for j in range(8)]
        vs.append(ir.Constant(vty, [0.0] * 8))
        while len(vs) > 1:  # 9 -> 5 -> 3 -> 2 -> 1
            vs = [larger(vs[i], vs[i + 1]) for i in range(0, len(vs) - 1, 2)] + vs[len(vs) - len(vs) % 2:]
        v = vs[0]
        for half in (4, 2, 1):  # lane i against lane i + half
            moved = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, 8),
                                                             [i + half if i < half else i for i in range(8)]))
            v = larger(v, moved)
        return builder.extract_element(v, ir.Constant(i32, 0))

    return sig, codegen


@njit(cache=True, inline="always")
def _loop_max64(arr, start):
    """The same maximum by eight independent running maxima (a single chain waits on itself)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = 0.0
    for d in range(start, start + 64, 8):
        m0 = max(m0, arr[d])
        m1 = max(m1, arr[d + 1])
        m2 = max(m2, arr[d + 2])
        m3 = max(m3, arr[d + 3])
        m4 = max(m4, arr[d + 4])
        m5 = max(m5, arr[d + 5])
        m6 = max(m6, arr[d + 6])
        m7 = max(m7, arr[d + 7])
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@njit(cache=True)
def _probe_max(a):
    return _llvm_max64(a, 0), _llvm_max64(a, 64)


def _choose_max():
    try:
        a = np.zeros(128)
        a[70], a[3] = 2.5, -1.0
        if _probe_max(a) != (0.0, 2.5):  # it must say what the loop says
            return _loop_max64, False
        return _llvm_max64, True
    except Exception:  # noqa: BLE001 -- any compile failure means: the loop, same answers
        return _loop_max64, False


#: ``max64(arr, start)``: max(0, max of arr[start:start + 64]) (float64, C order, in bounds)
max64, MAX64_SIMD = _choose_max()
