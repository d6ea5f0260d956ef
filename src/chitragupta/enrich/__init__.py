"""The enrichment layer: docling conversions, embeddings in FAISS, cross-encoder rerank, BERTopic topics.

Heavy and optional: its dependencies are the ``enrich`` extra and are imported only inside the stage
that needs them (``chitragupta.extras.require``), so ``import enrich`` and ``import engine`` stay light.
Run it as ``chitragupta enrich --stages docling,embed,bertopic``.
"""

__all__: list[str] = []
