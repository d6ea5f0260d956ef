"""A software prefetch for numba kernels: ``prefetch(array, i)`` asks the CPU to start loading the cache
line holding ``array[i]`` (read, kept in every level). A hint only: it reads nothing, so it can never
change a result, and an index past the end is harmless (no load happens).

Built on LLVM's ``llvm.prefetch`` intrinsic. Should that fail to compile under some numba / llvmlite
(checked once, on import, by compiling a probe), ``prefetch`` is a no-op instead and ``PREFETCH`` is
False: slower on sparse gathers, never different.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["prefetch", "PREFETCH"]


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
