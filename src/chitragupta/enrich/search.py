"""Embedding search: the drop-in alternative to BM25, returning the same SearchResponse.

    s = EmbedSearcher.open("my-workspace")              # the store built by `enrich --stages embed`
    resp = s.search("digital twin fidelity", k=10)      # hits: citekey, title, cosine score, snippet
    many = s.search_many(["q1", "q2"], k=100)

A query is encoded by the store's model, and the k x ``[enrich].embed_overfetch`` most similar chunks are
fetched by exact inner product (vectors are L2-normalised, so the score is cosine similarity, higher
first; ties by chunk order). The optional cross-encoder (``[enrich].rerank_model``) reorders that list,
then each citekey is capped at ``[enrich].embed_max_passages_per_source`` chunks, *then* it is cut to k:
a dominant source's excess promotes another source's chunk instead of shortening the list.

Search runs where ``[enrich].device`` resolves: FAISS on the GPU when faiss has GPU support, else a
torch matmul on CUDA, else FAISS on the CPU. All three are exact, so only speed differs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from chitragupta.engine.config import Config
from chitragupta.errors import UsageError
from chitragupta.engine.results import Note, SearchResponse, SearchResult
from chitragupta.engine.text.windows import choose_windows, normalize_ws
from chitragupta.engine.workspace import Workspace
from chitragupta.extras import require

__all__ = ["EmbedSearcher", "NOT_BUILT_HINT"]

log = logging.getLogger(__name__)

NOT_BUILT_HINT = "run `chitragupta enrich --stages embed`"
_QUERY_BLOCK = 256  # queries scored per matmul on the torch path (bounds the (q, n) score matrix)


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def _lead(text: str, width: int) -> str:
    """The first ``width`` characters of whitespace-normalised ``text``, cut back to a word boundary."""
    flat = normalize_ws(text)
    if len(flat) <= width:
        return flat
    cut = flat.rfind(" ", 0, width + 1)
    return flat[:cut if cut > 0 else width]


class EmbedSearcher:
    """Search a workspace's embedding store. Create with :meth:`open`."""

    UNIT = "chunk"

    def __init__(self, ws: Workspace, store, encoder, device: str, folder: Path, reranker=None):
        self.workspace = ws
        self.store = store
        self.encoder = encoder
        self.device = device
        self.folder = folder
        self.reranker = reranker
        self._search_fn = None
        self._live, self._titles, self._notes = self._ledger_view()
        from chitragupta.engine.stem import get_stemmer

        self._stem = get_stemmer(ws.config.retrieval.stemmer)

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             device: str | None = None) -> "EmbedSearcher":
        """Open the store for ``[enrich].embed_model``. UsageError when it has not been built (naming the
        command that builds it) or fails its checks; MissingExtra when the enrich extra is absent."""
        from chitragupta.enrich.device import resolve_device
        from chitragupta.enrich.embed import load_encoder, model_slug, recipe
        from chitragupta.enrich.rerank import load_reranker
        from chitragupta.enrich.store import StoreCorrupt, load_store, store_folder

        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        require("faiss", "enrich", "embedding search")
        require("sentence_transformers", "enrich", "embedding search")
        cfg = ws.config.enrich
        name = str(cfg.embed_model).strip()
        folder = ws.inside_content(store_folder(ws.content, model_slug(name)))
        if not folder.is_dir():
            raise UsageError(f"no embedding index for [enrich].embed_model = {name!r} "
                             f"(content/faiss/{folder.name}/ does not exist); {NOT_BUILT_HINT}")
        dev = resolve_device(device or cfg.device)
        enc = load_encoder(cfg, dev)
        try:
            store = load_store(folder, model=enc.model_name, dim=enc.dim, recipe=recipe(enc))
        except StoreCorrupt as err:
            raise UsageError(f"the embedding index in content/faiss/{folder.name}/ is not usable ({err}); "
                             f"{NOT_BUILT_HINT} to rebuild it") from err
        return cls(ws, store, enc, dev, folder, load_reranker(cfg, dev))

    # -- the ledger: every hit must still be a ledger row ---------------------------------------------
    def _ledger_view(self) -> tuple[np.ndarray, list[str], list[Note]]:
        from chitragupta.engine.corpus.ledger import Ledger

        store = self.store
        titles = list(store.titles)
        live = np.ones(len(store.citekeys), dtype=bool)
        notes: list[Note] = []
        if not self.workspace.ledger_path.exists():
            return live, titles, notes
        with Ledger(self.workspace.ledger_path, create=False) as ledger:
            view = {k: (t, status) for k, t, status, _rel in ledger.index_view()}
        pos = {k: i for i, k in enumerate(store.citekeys)}
        for i, k in enumerate(store.citekeys):
            if k in view:
                titles[i] = view[k][0]
            else:
                live[i] = False
        gone = int((~live).sum())
        missing = [k for k, (_t, status) in view.items() if k not in pos and status == "parsed"]
        if gone:
            notes.append(Note("index", f"{gone} source(s) in the embedding index are no longer in the ledger and "
                                       f"are never returned; {NOT_BUILT_HINT} to drop them"))
        if missing:
            notes.append(Note("index", f"{len(missing)} parsed source(s) in the ledger are not in the embedding "
                                       f"index and cannot be returned; {NOT_BUILT_HINT}"))
        return live, titles, notes

    def index_notes(self) -> list[Note]:
        notes = list(self._notes)
        if self.reranker is not None:
            notes.append(Note("rerank", f"candidates reordered by the cross-encoder in {self.reranker.path}"))
        return notes

    # -- exact nearest chunks ------------------------------------------------------------------------
    def _searcher(self):
        """``(queries (q, dim) float32, n) -> (scores (q, n), rows (q, n))``, chosen once per device."""
        if self._search_fn is not None:
            return self._search_fn
        from chitragupta.enrich.device import faiss_gpu_available

        index = self.store.faiss_index()
        if self.device == "cuda" and faiss_gpu_available():
            faiss = require("faiss", "enrich", "embedding search")
            self._gpu_res = faiss.StandardGpuResources()
            gpu = faiss.index_cpu_to_gpu(self._gpu_res, 0, index)
            self._search_fn = lambda q, n: gpu.search(q, n)
            log.info("embedding search: faiss on the GPU")
        elif self.device == "cuda":
            torch = require("torch", "enrich", "embedding search on CUDA")
            vecs = torch.from_numpy(self.store.vectors).to("cuda")
            log.info("embedding search: faiss has no GPU support here; exact search by a torch matmul on cuda")

            def torch_search(q, n):
                scores, rows = [], []
                for lo in range(0, len(q), _QUERY_BLOCK):
                    s = torch.from_numpy(q[lo:lo + _QUERY_BLOCK]).to("cuda") @ vecs.T
                    top = torch.topk(s, n, dim=1)
                    scores.append(top.values.float().cpu().numpy())
                    rows.append(top.indices.cpu().numpy())
                return np.concatenate(scores), np.concatenate(rows)

            self._search_fn = torch_search
        else:
            self._search_fn = lambda q, n: index.search(q, n)
        return self._search_fn

    def rank_many(self, queries: Sequence[str], k: int = 10, *,
                  max_per_source: int | None = None) -> list[list[tuple[int, float]]]:
        """Per query, up to k (chunk row, score) best first: over-fetch, rerank if configured, cap (at
        ``max_per_source``, default ``[enrich].embed_max_passages_per_source``), cut."""
        k = _check_k(k)
        queries = list(queries)
        cfg = self.workspace.config.enrich
        n_chunks = self.store.count
        if not queries:
            return []
        if n_chunks == 0:
            return [[] for _ in queries]
        n = min(k * int(cfg.embed_overfetch), n_chunks)
        qv = self.encoder.encode_queries(queries)
        scores, rows = self._searcher()(np.ascontiguousarray(qv, dtype=np.float32), n)
        scores, rows = np.asarray(scores, dtype=np.float32), np.asarray(rows, dtype=np.int64)
        cap = int(cfg.embed_max_passages_per_source) if max_per_source is None else _check_k(max_per_source)
        doc = self.store.chunk_doc
        out = []
        for q in range(len(queries)):
            r, s = rows[q], scores[q]
            keep = r >= 0
            r, s = r[keep], s[keep]
            order = np.lexsort((r, -s))  # score descending, then chunk order: the same on every device
            r, s = r[order], s[order]
            r_live = self._live[doc[r]]
            r, s = r[r_live], s[r_live]
            if self.reranker is not None and len(r):
                pos, s = self.reranker.order(queries[q], [self.store.chunk_text(int(x)) for x in r])
                r = r[pos]
            per: dict[int, int] = {}
            hits = []
            for row, score in zip(r.tolist(), s.tolist()):
                d = int(doc[row])
                if per.get(d, 0) >= cap:
                    continue
                per[d] = per.get(d, 0) + 1
                hits.append((row, float(score)))
                if len(hits) == k:
                    break
            out.append(hits)
        return out

    def docid(self, row: int) -> str:
        """A chunk's TREC doc id: ``<citekey>#<chunk number>``."""
        return f"{self.store.citekeys[int(self.store.chunk_doc[row])]}#{int(self.store.chunk_no[row])}"

    def citekey(self, row: int) -> str:
        return self.store.citekeys[int(self.store.chunk_doc[row])]

    # -- citable hits --------------------------------------------------------------------------------
    def snippet(self, row: int, query: str, width: int) -> str:
        """The chunk's text, whitespace-normalised; when wider than ``width``, the window of that width in
        the chunk holding the most query words (the shared window chooser), else its first words."""
        from chitragupta.engine.tokenize import query_terms

        text = self.store.chunk_text(row)
        if len(normalize_ws(text)) <= width:
            return normalize_ws(text)
        wins = choose_windows(text, query_terms(query)[0], width, 1, stem=self._stem)
        return wins[0].text if wins else _lead(text, width)

    def _hit(self, row: int, score: float, query: str, width: int) -> SearchResult:
        d = int(self.store.chunk_doc[row])
        return SearchResult(citekey=self.store.citekeys[d], title=self._titles[d], score=score,
                            snippet=self.snippet(row, query, width) if width else "",
                            passage=int(self.store.chunk_no[row]))

    def search_many(self, queries: Sequence[str], k: int = 10, *,
                    snippet_chars: int | None = None) -> list[SearchResponse]:
        """Batched search; ``snippet_chars=None`` uses ``[retrieval].snippet_chars``, 0 skips snippets.
        A hit's ``passage`` is its chunk number within the document."""
        width = self.workspace.config.retrieval.snippet_chars if snippet_chars is None else int(snippet_chars)
        if width < 0:
            raise UsageError(f"snippet_chars must be >= 0, got {snippet_chars!r}")
        ranked = self.rank_many(queries, k)
        return [SearchResponse(query=q, hits=[self._hit(r, s, q, width) for r, s in hits], notes=[], unit=self.UNIT)
                for q, hits in zip(queries, ranked)]

    def search(self, query: str, k: int = 10, snippet_chars: int | None = None) -> SearchResponse:
        """One query: hits with snippets, best first, and the index's notes."""
        resp = self.search_many([query], k, snippet_chars=snippet_chars)[0]
        resp.notes[:0] = self.index_notes()
        return resp
