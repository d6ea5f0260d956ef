"""The numba scan behind ``kernels.phrase.phrase_units`` (its own module: a cold query checking a few
candidates in numpy never imports numba)."""

from numba import njit

__all__ = ["scan"]


@njit(cache=True, nogil=True)
def scan(seq, lo, hi, pattern, out):  # pragma: no cover (compiled)
    """out[i] = whether seq[lo[i]:hi[i]] holds ``pattern`` contiguously (spans checked by the caller)."""
    m = pattern.shape[0]
    p0 = pattern[0]
    for i in range(lo.shape[0]):
        j = lo[i]
        last = hi[i] - m
        while j <= last:
            if seq[j] == p0:
                r = 1
                while r < m and seq[j + r] == pattern[r]:
                    r += 1
                if r == m:
                    out[i] = True
                    break
            j += 1
