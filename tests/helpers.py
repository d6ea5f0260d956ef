"""Helpers the tests share that are not fixtures: things built locally so that no test downloads."""

from __future__ import annotations

from pathlib import Path

__all__ = ["age_texts", "tiny_cross_encoder"]

_VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a of and in to is for on with by paper study model data "
          "method result effect cell protein gene water heat ocean vaccine twin digital sensor query "
          "retrieval ranking index citation patient risk cancer treatment").split()


def age_texts(root: Path, seconds: float = 60.0) -> None:
    """Set the workspace's parsed-text folders a minute into the past, so that the warm engines trust their
    stamp (one written within the last 2 s is not trusted, and every call would reopen). The packs folder of
    an import is part of that stamp too."""
    import os
    import time

    old = time.time() - seconds
    for folder in ("parsed", "parsed/packs"):
        path = Path(root) / "content" / folder
        if path.is_dir():
            os.utime(path, (old, old))


def tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """A tiny randomly initialised BERT cross-encoder (2 layers, hidden 32, one output logit) and its
    (fast) WordPiece tokenizer over a small fixed vocabulary, saved to ``folder`` with save_pretrained. Built
    locally: nothing is downloaded. Its scores are arbitrary but deterministic for a seed."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(_VOCAB) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(_VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).eval().save_pretrained(str(folder))
    return folder
