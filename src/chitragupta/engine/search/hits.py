"""BM25's ids as citable hits: a document's title and the snippet window holding most of the query's
terms, a passage's paragraph (whole when it fits the snippet width, else its window holding most of the
query's terms) with its page and item number, and one source's evidence (``<citekey>#<item>``: that
passage whole).

The text a hit quotes is the text the index read (``engine.index.source.load_body``: the reference list
cut, hyphens joined, the front matter known), kept per parsed file while the file and its sidecar are
unchanged, up to ``BODY_CHARS`` characters in all, least recently used out.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from chitragupta.engine.index.source import FLAG_TEXT_MISSING, load_body, sidecar_path
from chitragupta.notes import Note
from chitragupta.engine.search.byline import with_bylines
from chitragupta.engine.search.results import Ranked, SearchResponse, SearchResult
from chitragupta.engine.search.searcher import check_k
from chitragupta.engine.text.tokenize import runs_bytes
from chitragupta.engine.text.windows import choose_windows, fitted
from chitragupta.errors import UsageError

__all__ = ["HitBuilder", "BODY_CHARS"]

BODY_CHARS = 1 << 24  # characters of text kept (16M: scifact whole, ~300 full-text papers), least recent out

_SIDECAR_SUFFIX = sidecar_path(Path("x.txt")).name[1:]  # what replaces ".txt" in a parsed file's sidecar


def _stat_key(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class HitBuilder:
    """Turns a ``BM25Scorer``'s ids into ``SearchResult`` s (module docstring)."""

    def __init__(self, scorer):
        self.scorer = scorer
        self._root = str(scorer.workspace.root)
        self._bodies: dict = {}  # (path, its stat, its sidecar's stat) -> Body, least recently used first
        self._body_chars = 0
        self._lock = threading.Lock()  # the kept bodies, for a warm server's worker threads

    # -- the text a hit quotes -----------------------------------------------------------------------
    def body(self, doc_id: int):
        """The ``Body`` the document index read for row ``doc_id`` (empty when its text is not on disk)."""
        _key, _title, _status, rel = self.scorer.rows["document"][doc_id]
        if not rel or self.scorer.index.flags[doc_id] & FLAG_TEXT_MISSING:
            return load_body(None)
        return self.load_body(rel)

    def load_body(self, rel: str):
        """``load_body`` of a parsed file, kept while the file and its sidecar are unchanged (size,
        mtime and inode of both, checked on every use). A warm server answers many queries from the
        same sources: the bodies it read are kept up to ``BODY_CHARS`` characters in all."""
        path = os.path.join(self._root, rel)
        side = path[:-4] + _SIDECAR_SUFFIX if path.endswith(".txt") else str(sidecar_path(Path(path)))
        key = (rel, _stat_key(path), _stat_key(side))
        with self._lock:
            got = self._bodies.pop(key, None)
            if got is not None:
                self._bodies[key] = got  # most recent last
                return got
        got = load_body(Path(path))
        if key[1] is None:
            return got
        with self._lock:
            if key not in self._bodies:  # (another thread may have read it meanwhile)
                self._body_chars += len(got.text)
                while self._bodies and self._body_chars > BODY_CHARS:
                    self._body_chars -= len(self._bodies.pop(next(iter(self._bodies))).text)
            self._bodies[key] = got
        return got

    # -- hits ----------------------------------------------------------------------------------------
    def doc_hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        """Document ``doc_id`` as a citable hit: its title and the ``width``-character window holding most
        of ``terms`` (0 or None: no snippet)."""
        key, title, _status, _rel = self.scorer.rows["document"][doc_id]
        snippet, page = "", None
        if width:
            body = self.body(doc_id)
            wins = choose_windows(body.text, terms, width, 1, stem=self.scorer.index.stem, body_start=body.front)
            if wins:
                snippet, page = wins[0].text, body.page_at(wins[0].anchor)
        return SearchResult(citekey=key, title=title, score=float(score), snippet=snippet, page=page)

    def passage_hit(self, u: int, score: float, cache: dict, terms: list[str] = (), width: int | None = None
                    ) -> SearchResult:
        """Passage ``u`` as a citable hit: its page, item number and paragraph, whole when ``width`` is
        None or it fits, else its ``width``-character window holding most of ``terms`` (0: no snippet).
        ``cache`` keeps the items read across calls."""
        pidx = self.scorer.passage_index()
        d, item = int(pidx.p_doc[u]), int(pidx.p_item[u])
        key, title, _status, _rel = self.scorer.rows["passage"][d]
        items = self._items(d, cache)
        it = items[item] if item < len(items) else {"text": "", "page": None}
        text = it["text"] if width is None else fitted(it["text"], list(terms), width, self.scorer.index.stem)
        return SearchResult(citekey=key, title=title, score=float(score), snippet=text, page=it["page"],
                            passage=item)

    def _items(self, d: int, cache: dict) -> list[dict]:
        """The passage unit's items of its document ``d`` (``passage_items``), kept in ``cache``."""
        from chitragupta.engine.index.passage import passage_items  # (a document search never needs it)

        if d not in cache:
            rel = self.scorer.rows["passage"][d][3]
            cache[d] = passage_items(self.load_body(rel) if rel else load_body(None))
        return cache[d]

    def responses(self, ranked: Ranked, width: int) -> list[SearchResponse]:
        """``ranked`` as citable hits, each with a ``width`` snippet (0: none)."""
        terms, notes = ranked.terms, ranked.notes
        out, cache = [], {}
        for q, query in enumerate(ranked.queries):
            ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
            if ranked.unit == "passage":
                hits = [self.passage_hit(int(u), float(s), cache, terms[q], width) for u, s in zip(ids, scores)
                        if u >= 0]
            else:
                hits = [self.doc_hit(int(d), float(s), terms[q], width) for d, s in zip(ids, scores) if d >= 0]
            out.append(SearchResponse(query=query, hits=hits, notes=list(notes[q]), terms=terms[q], unit=ranked.unit))
        return out

    def evidence(self, doc_id: int, citekey: str, query: str, *, n: int, width: int) -> SearchResponse:
        """Up to ``n`` windows of ``width`` characters of document ``doc_id`` bearing on ``query``
        (``BM25Searcher.evidence``), in the order the text holds them; each one's score is the share of
        the query's distinct terms it holds (1.0: every one)."""
        n = check_k(n, "n")
        width = check_k(width, "width")
        plan = self.scorer.plan([query])
        terms, notes = plan.terms[0], list(plan.notes()[0])
        body = self.body(doc_id)
        title = self.scorer.rows["document"][doc_id][1]
        stem = self.scorer.index.stem
        distinct = max(1, len({stem(t) for t in terms} if stem else set(terms)))  # as the window chooser counts
        hits = [SearchResult(citekey=citekey, title=title, score=w.covered / distinct, snippet=w.text,
                             page=body.page_at(w.anchor))
                for w in choose_windows(body.text, terms, width, n, stem=stem, body_start=body.front)]
        hits = with_bylines(self.scorer.workspace, [SearchResponse(query, hits)])[0].hits
        if terms and not hits:
            notes.append(Note("no-window", f"{citekey} has no passage holding a query term"
                                           + (" (its text is not on disk)" if not body.text else "")))
        return SearchResponse(query=query, hits=hits, notes=notes, terms=terms, unit="evidence")

    def passage_evidence(self, doc_id: int, citekey: str, item: int, query: str) -> SearchResponse:
        """Passage ``item`` of document ``doc_id`` whole, with its page; its score is the number of
        distinct query terms it holds. UsageError naming the passages there are for one it has not."""
        from chitragupta.engine.index.passage import passage_items

        plan = self.scorer.plan([query])
        terms, notes = plan.terms[0], list(plan.notes()[0])
        items = passage_items(self.body(doc_id))
        if item >= len(items):
            raise UsageError(f"{citekey} has no passage {item}; its items are numbered 0 to {len(items) - 1}"
                             if items else f"{citekey} has no passages (no parsed text)")
        it, term = items[item], self.scorer.index.index_term
        held = {term(r.decode("ascii")) for r in runs_bytes(it["text"])}
        hit = SearchResult(citekey=citekey, title=self.scorer.rows["document"][doc_id][1], passage=item,
                           score=float(len({term(t) for t in terms} & held)), snippet=it["text"], page=it["page"])
        return SearchResponse(query=query, hits=[hit], notes=notes, terms=terms, unit="evidence")
