"""Two LLVM intrinsics for numba kernels, each with a plain fallback chosen once on import.

``prefetch(array, i)`` asks the CPU to start loading the cache line holding ``array[i]`` (read, kept in
every level). A hint only: it reads nothing, so it can never change a result, and an index past the end
is harmless (no load happens). Built on LLVM's ``llvm.prefetch``; should that fail to compile under some
numba / llvmlite (checked by compiling a probe), ``prefetch`` is a no-op and ``PREFETCH`` is False: slower
on sparse gathers, never different.

``any_above64(arr, start, thr)``: whether any of the 64 doubles arr[start:start + 64] is > thr, as eight
<8 x double> ordered compares OR-ed together -- what the tiles' offer asks of every block of the
accumulator (``chitragupta.kernels._tiles._tile_offer``). numba's own loops keep a running maximum scalar
(its ``max`` is not LLVM's maxnum, so nothing vectorizes it): this is ~3x faster per value on AVX-512 and
gives the same answer as the loop, which it falls back to (``ANY_ABOVE_SIMD`` False) should it fail to
compile or disagree with the loop on the probe.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["prefetch", "PREFETCH", "any_above64", "ANY_ABOVE_SIMD"]


@intrinsic
def _llvm_prefetch(typingctx, arr, idx):
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False, boundscheck=False)
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


# -- any of 64 doubles above a threshold, as one SIMD compare ---------------------------------------------


@intrinsic
def _llvm_any_above64(typingctx, arr, start, thr):
    """True when any of arr[start:start + 64] (a C-contiguous float64 array; the caller keeps the span in
    bounds) is > thr, ordered: one <8 x double> compare per 8 values, OR-ed, then tested once."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"
            and isinstance(start, types.Integer) and thr == types.float64):
        return None
    sig = types.boolean(arr, start, thr)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False, boundscheck=False)
        vty = ir.VectorType(ir.DoubleType(), 8)
        vptr = builder.bitcast(ptr, vty.as_pointer())
        limit = ir.Constant(vty, ir.Undefined)
        for j in range(8):
            limit = builder.insert_element(limit, args[2], ir.Constant(ir.IntType(32), j))
        above = None
        for j in range(8):
            v = builder.load(builder.gep(vptr, [ir.Constant(ir.IntType(64), j)]), align=8)
            c = builder.fcmp_ordered(">", v, limit)
            above = c if above is None else builder.or_(above, c)
        return builder.icmp_unsigned("!=", builder.bitcast(above, ir.IntType(8)), ir.Constant(ir.IntType(8), 0))

    return sig, codegen


@njit(cache=True, inline="always")
def _loop_any_above64(arr, start, thr):
    for d in range(start, start + 64):
        if arr[d] > thr:
            return True
    return False


@njit(cache=True)
def _probe_any(a):
    return _llvm_any_above64(a, 0, 0.5) + 2 * _llvm_any_above64(a, 64, 0.5)


def _choose_any():
    try:
        a = np.zeros(128)
        a[70] = 1.0
        if _probe_any(a) != 2:  # the compare must say what a loop says
            return _loop_any_above64, False
        return _llvm_any_above64, True
    except Exception:  # noqa: BLE001 -- any compile failure means: the loop, same answers
        return _loop_any_above64, False


#: ``any_above64(arr, start, thr)``: any of arr[start:start + 64] > thr (float64, C order, in bounds)
any_above64, ANY_ABOVE_SIMD = _choose_any()
