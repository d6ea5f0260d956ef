"""The file names of parsed texts: one per citekey, unique even on a case-insensitive file system.

A citekey's name is its ``safe_name`` (the key itself when it is a plain file name), unless another key
in the ledger or the source folds onto the same name (``Lo2020``, ``lo2020``): then every member of that
case-folded group is ``hashed_name``'d. A name is a function of the key and of which keys exist, so a
run that removes keys first and names after ends where a clean build of the same source would.
"""

from __future__ import annotations

from typing import Iterable

from chitragupta.engine.library.workspace import hashed_name, safe_name

__all__ = ["assign_names", "Names"]


def assign_names(citekeys: Iterable[str]) -> dict[str, str]:
    """Safe file-name stems for a set of citekeys, unique even on case-insensitive file systems: a key
    whose safe name case-folds to another key's is hashed (``hashed_name``), and so is that other key."""
    names: dict[str, str] = {}
    taken: set[str] = set()  # case-folded names seen
    clash: set[str] = set()  # ... more than once
    for k in citekeys:
        if k in names:
            continue
        n = names[k] = safe_name(k)
        folded = n.casefold()
        if folded in taken:
            clash.add(folded)
        else:
            taken.add(folded)
    if clash:
        for k, n in names.items():
            if n.casefold() in clash:
                names[k] = hashed_name(k)
    return names


class Names:
    """``assign_names`` over the keys the ledger keeps and a file's, drawn while the file is read once
    (``import``, which does not hold a million keys twice).

    Every ledger key is known before the read; a record's key is named as ``assign_names`` would name it
    given the keys seen so far. Two things are only known at the end: a *new* key can join a case-folded
    group late (the member named plainly earlier must be hashed), and a group can lose members to the
    removal of keys the file no longer lists (a lone survivor gets its plain name back). ``redo`` lists
    those keys, to be rewritten under their final names after the removals are committed (a second read
    of just those records), so a run ends at ``assign_names(ledger - removed | file)`` -- the names the
    next run draws too.
    """

    def __init__(self, ledger_keys: Iterable[str]):
        self.first: dict[str, str] = {}  # case-folded safe name -> the first key that has it
        self.clash: set[str] = set()  # folded names with more than one key: hashed
        self.members: dict[str, list[str]] = {}  # a clashing folded name -> its keys
        self.late: set[str] = set()
        for k in ledger_keys:
            f = self._fold(safe_name(k))
            owner = self.first.setdefault(f, k)
            if owner != k:
                self.clash.add(f)
                self.members.setdefault(f, [owner]).append(k)

    @staticmethod
    def _fold(n: str) -> str:
        f = n.casefold()
        return n if f == n else f  # one string object for the common lower-case name

    def name(self, key: str, new: bool, seen: set[str]) -> str:
        """``key``'s name now; ``new``: not in the ledger; ``seen``: the keys already named in this run."""
        n = safe_name(key)
        f = self._fold(n)
        if new:
            owner = self.first.setdefault(f, key)
            if owner != key:
                if f not in self.clash:
                    self.clash.add(f)
                    self.members[f] = [owner]
                    if owner in seen:  # named plainly earlier in this run: to be hashed
                        self.late.add(owner)
                self.members[f].append(key)
        return hashed_name(key) if f in self.clash else n

    def redo(self, removed: Iterable[str], seen: set[str]) -> dict[str, str]:
        """After the read: the keys of this run whose final name differs from the one they were given,
        each with that first name; the names drawn from here on are the final ones."""
        out = {k: safe_name(k) for k in self.late}
        self.late = set()
        removed = set(removed)
        if removed:
            for f in [f for f, keys in self.members.items() if any(k in removed for k in keys)]:
                left = [k for k in self.members[f] if k not in removed]
                if len(left) > 1:
                    self.members[f] = left
                    continue
                del self.members[f]
                self.clash.discard(f)
                out.update((k, hashed_name(k)) for k in left if k in seen)
        return out
