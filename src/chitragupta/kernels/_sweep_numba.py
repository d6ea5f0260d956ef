"""numba kernel behind ``chitragupta.kernels.sweep`` (see there for the formula and the layout)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from chitragupta.kernels.cpu import _select_into


@njit(parallel=True, cache=True)
def sweep_kernel(indptr, indices, tf, f1, f2, dt, da, has_fields, idf, norms, k1p1,
                 q_indptr, q_terms, k, n_chunks, out_ids, out_scores):
    """out_ids/out_scores (G, n_queries, k) arrive filled with -1 / -inf.

    norms float64[n_docs * G] (document-major), dt/da/k1p1 float64[G]; f1/f2 read only when has_fields.
    """
    G = k1p1.shape[0]
    n_docs = norms.shape[0] // G
    n_q = q_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n_docs * G, dtype=np.float64)
        col = np.zeros(n_docs, dtype=np.float64)
        mark = np.zeros(n_docs, dtype=np.uint8)
        touched = np.empty(n_docs, dtype=np.int64)
        cand = np.empty(n_docs, dtype=np.int64)
        buf = np.empty(n_docs, dtype=np.int64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        fg = np.empty(G, dtype=np.float64)
        lo = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo, hi_q):
            m = 0
            for j in range(q_indptr[q], q_indptr[q + 1]):
                t = q_terms[j]
                w = idf[t]
                for p in range(indptr[t], indptr[t + 1]):
                    d = indices[p]
                    if mark[d] == 0:
                        mark[d] = 1
                        touched[m] = d
                        m += 1
                    base = d * G
                    f = np.float64(tf[p])
                    if has_fields:
                        t1 = np.float64(f1[p]) if f1.shape[0] else 0.0
                        t2 = np.float64(f2[p]) if f2.shape[0] else 0.0
                        for g in range(G):
                            fg[g] = f + dt[g] * t1 + da[g] * t2
                        for g in range(G):
                            x = fg[g]
                            if x > 0.0:
                                acc[base + g] += w * x * k1p1[g] / (x + norms[base + g])
                    else:
                        for g in range(G):
                            acc[base + g] += w * f * k1p1[g] / (f + norms[base + g])
            for g in range(G):
                n_c = 0
                for i in range(m):
                    d = touched[i]
                    col[d] = acc[d * G + g]
                    cand[n_c] = d
                    n_c += col[d] > 0.0
                _select_into(col, cand, n_c, k, hs, hi, buf, out_ids[g, q], out_scores[g, q])
            for i in range(m):
                d = touched[i]
                mark[d] = 0
                col[d] = 0.0
                for g in range(G):
                    acc[d * G + g] = 0.0
