"""The numba kernels behind ``kernels.phrase`` (their own module: a cold query checking a few candidates in
numpy never imports numba)."""

from numba import njit

__all__ = ["anchored"]


@njit(cache=True, nogil=True)
def anchored(seq, ptr, indices, tf, lo_t, hi_t, pos, pos_lo, pos_hi, cands, pattern, offset, out):  # pragma: no cover
    """out[c] = whether candidate cands[c] holds ``pattern``, found from the occurrences of its anchor term
    (``pattern[offset]``): the term's postings ``indices/tf[lo_t:hi_t]`` (ascending documents) and their
    positions ``pos[pos_lo:pos_hi]`` (per posting, ``tf`` of them, ascending), each occurrence's
    neighbours compared in ``seq``. ``cands`` ascending, each holding the term; spans checked by the caller."""
    m = pattern.shape[0]
    i = lo_t
    p = pos_lo
    for c in range(cands.shape[0]):
        d = cands[c]
        while i < hi_t and indices[i] < d:
            p += tf[i]
            i += 1
        if i >= hi_t or indices[i] != d:
            continue
        base = ptr[d]
        n = ptr[d + 1] - base
        q_end = min(p + tf[i], pos_hi)
        for q in range(p, q_end):
            s = pos[q] - offset
            if s < 0 or s + m > n:
                continue
            r = 0
            while r < m and seq[base + s + r] == pattern[r]:
                r += 1
            if r == m:
                out[c] = True
                break
