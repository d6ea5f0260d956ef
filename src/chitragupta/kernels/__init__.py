"""Arrays in, arrays out: BM25 scoring and exact top-k for batches of queries.

Kernels see CSR arrays and parameters, never a workspace, a path or a config object. Importing this
package imports neither numba nor torch; a backend's module is imported when it is first resolved.
"""

from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK
from chitragupta.kernels.dispatch import BACKENDS, resolve, score_topk

__all__ = ["BM25Params", "Postings", "QueryBatch", "TopK", "BACKENDS", "resolve", "score_topk"]
