"""``serve/replies.py``: every reply within its cap (a longer list cut to the most items that fit, with a note
saying so), notes as objects, and no absolute workspace path -- checked without a server."""

from __future__ import annotations

import json

import pytest

from chitragupta.notes import Note, note_dicts
from chitragupta.serve.replies import ReplyTooLarge, capped, finished, relative_text, reply_chars

pytest.importorskip("pydantic_core")


def _hits(n: int, width: int = 300) -> list[dict]:
    return [{"citekey": f"k{i}", "title": "T" * (i % 7), "authors": ["Lo", "Wang"], "year": 2020, "score": i / 3,
             "snippet": "ü" * (width + i % 11), "page": None, "passage": None} for i in range(n)]


def test_reply_chars_is_the_sdks_text_length():
    import pydantic_core

    reply = {"hits": _hits(3), "notes": [{"kind": "x", "text": "é"}]}
    assert reply_chars(reply) == len(pydantic_core.to_json(reply, fallback=str, indent=2).decode())
    assert reply_chars(reply) >= len(json.dumps(reply, ensure_ascii=False))


@pytest.mark.parametrize("n", [1, 2, 7, 40, 333])
@pytest.mark.parametrize("limit", [1_000, 4_000, 30_000])
def test_a_reply_is_never_over_its_cap_and_keeps_the_most_items_that_fit(n, limit):
    reply = {"hits": _hits(n), "notes": [Note("dropped", "the word 'a' was dropped")]}
    whole = finished(reply)
    try:
        got = finished(reply, limit=limit)
    except ReplyTooLarge as err:  # not even one hit fits beside the note
        assert reply_chars(finished(dict(reply, hits=reply["hits"][:1]))) > limit - 300, err
        assert f"[serve].max_reply_chars = {limit:,}" in str(err)
        return
    assert reply_chars(got) <= limit
    if reply_chars(whole) <= limit:
        assert got == whole
        return
    kept = len(got["hits"])
    assert got["hits"] == whole["hits"][:kept] and kept < n
    assert got["notes"][:-1] == whole["notes"] and got["notes"][-1]["kind"] == "truncated"
    assert f"the first {kept:,} of {n:,} hits" in got["notes"][-1]["text"]
    one_more = dict(got, hits=whole["hits"][:kept + 1])  # one item more would not have fit
    assert reply_chars(one_more) > limit


def test_the_longest_list_is_cut_and_a_reply_without_one_is_refused():
    reply = {"terms": [{"t": "x" * 50}] * 200, "dropped": ["a"], "score": 1.0}
    got = capped(reply, 3_000)
    assert got["dropped"] == ["a"] and 0 < len(got["terms"]) < 200 and got["notes"][0]["kind"] == "truncated"
    with pytest.raises(ReplyTooLarge, match=r"the reply would be [\d,]+ characters, past \[serve\].max_reply_chars"):
        capped({"abstract": "x" * 5_000}, 2_000)


def test_notes_are_objects_in_one_shape_whatever_the_tool_gave():
    got = note_dicts([Note("index", "rebuilt"), "a plain string", {"kind": "k", "text": "t"}])
    assert got == [{"kind": "index", "text": "rebuilt"}, {"kind": "note", "text": "a plain string"},
                   {"kind": "k", "text": "t"}]
    assert finished({"cited_by": [], "notes": ["no source cites it"]}) == \
        {"cited_by": [], "notes": [{"kind": "note", "text": "no source cites it"}]}


def test_no_absolute_workspace_path_in_a_note(tmp_path):
    root = tmp_path / "ws"
    got = finished({"hits": [], "notes": [f"{root}/content/index/doc: rebuilt", f"the workspace {root} is busy"]},
                   root=root)
    assert [n["text"] for n in got["notes"]] == ["content/index/doc: rebuilt", "the workspace . is busy"]
    assert relative_text(f"{root}2/x and {root}", root) == f"{root}2/x and ."  # another folder kept
