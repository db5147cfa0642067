"""Exact and near-duplicate prompts: normalization, prompt keys, MinHash LSH (datasketch).

Two prompts are the *same* when their normalized text is equal (:func:`normalized_prompt`:
the non-system messages' text, Unicode NFKC, lower case, one space between words, punctuation
stripped from the ends of words); :func:`prompt_key` is the SHA-256 of that text, and the split
is drawn from it, so a prompt asked twice with two ground truths (counter's prompts do not
state the start value) lands in one split.

Two prompts are *near-duplicates* when the Jaccard similarity of their word n-gram shingles
is at least a threshold (``NearDupSettings.threshold``). :class:`PromptIndex` finds candidates
with datasketch's MinHash LSH and confirms each with the exact Jaccard of the shingle sets, so
a reported pair is really above the threshold; a pair right at the threshold is missed with
probability under 1 % (:func:`band_layout`), one further above it less often still. By default the numbers of a prompt must match too
(the sorted list of its digit runs is mixed into every shingle): a rewording keeps the
problem's numbers, while two instances of one template (Nim with heaps [3, 4] and [3, 5]) differ
in them and are different tasks. What is not covered: paraphrases that share few word
n-grams (a translation, a synonym in every sentence); prompts of fewer words than the
shingle size are compared as a whole.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

_EDGE_PUNCTUATION = re.compile(r"^[^\w]+|[^\w]+$")
_NUMBER = re.compile(r"\d+")


class NearDupSettings(BaseModel):
    """How near-duplicate prompts are found; one field per knob, each documented once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(
        0.8,
        ge=0.5,
        le=1.0,
        description="Jaccard similarity of word-shingle sets at or above which two prompts "
        "are near-duplicates.",
    )
    shingle_words: int = Field(3, ge=1, le=8, description="Words per shingle (n-gram size).")
    num_perm: int = Field(
        128, ge=16, le=1024, description="MinHash permutations (more: fewer missed pairs, slower)."
    )
    numbers_must_match: bool = Field(
        True,
        description="Near-duplicates must hold the same numbers (template instances that "
        "differ in a number are different tasks).",
    )


def normalized_prompt(prompt: Sequence[dict]) -> str:
    """The text two prompts are compared by: non-system messages, normalized word by word."""
    text = "\n".join(
        str(m.get("content") or "") for m in prompt if m.get("role", "user") != "system"
    )
    return " ".join(_words(text))


def normalized_text(text: str) -> str:
    """:func:`normalized_prompt` of one user message."""
    return " ".join(_words(text))


def _words(text: str) -> list[str]:
    words = unicodedata.normalize("NFKC", text).lower().split()
    return [_EDGE_PUNCTUATION.sub("", w) or w for w in words]  # "chf?" -> "chf"; "..." stays


def prompt_key(prompt: Sequence[dict]) -> str:
    """SHA-256 (hex) of the normalized prompt: equal for prompts that differ only in form."""
    return text_key(normalized_prompt(prompt))


def text_key(normalized: str) -> str:
    return hashlib.sha256(normalized.encode()).hexdigest()


def shingles(normalized: str, settings: NearDupSettings) -> frozenset[bytes]:
    """Word n-grams of a normalized text, each prefixed by the text's numbers when they count."""
    words = normalized.split(" ")
    k = settings.shingle_words
    grams = [" ".join(words)] if len(words) < k else [
        " ".join(words[i : i + k]) for i in range(len(words) - k + 1)
    ]  # fmt: skip
    prefix = ""
    if settings.numbers_must_match:
        prefix = " ".join(sorted(_NUMBER.findall(normalized))) + "|"
    return frozenset(f"{prefix}{g}".encode() for g in grams)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


RECALL_AT_THRESHOLD = 0.99


def band_layout(threshold: float, num_perm: int) -> tuple[int, int]:
    """LSH ``(bands, rows)``: the most selective layout that still makes a pair right at the
    threshold a candidate with probability >= ``RECALL_AT_THRESHOLD`` (1 - (1 - t^r)^b).

    datasketch's own layout balances misses against false candidates, which misses about half
    of the pairs right at the threshold; candidates are confirmed exactly here, so a false
    candidate costs only a set comparison while a miss is a leak.
    """
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if 1 - (1 - threshold**rows) ** bands >= RECALL_AT_THRESHOLD:
            return bands, rows
    return num_perm, 1


@dataclass(frozen=True)
class Match:
    """A near-duplicate found in the index: its key and the exact Jaccard similarity."""

    key: str
    similarity: float


class PromptIndex:
    """Normalized prompts under MinHash LSH; :meth:`query` returns confirmed near-duplicates.

    Keys are the caller's (a task id, a prompt key); a text inserted twice under two keys is
    two entries. Batch calls (:meth:`insert`, :meth:`query`) hash shingles with numpy in bulk.
    """

    def __init__(self, settings: NearDupSettings | None = None) -> None:
        from datasketch import MinHashLSH

        self.settings = settings or NearDupSettings()
        bands, rows = band_layout(self.settings.threshold, self.settings.num_perm)
        self._lsh = MinHashLSH(num_perm=self.settings.num_perm, params=(bands, rows))
        self._shingles: dict[str, frozenset[bytes]] = {}

    def __len__(self) -> int:
        return len(self._shingles)

    def insert(self, entries: Iterable[tuple[str, str]]) -> None:
        """Add ``(key, normalized text)`` pairs; a key already present is kept as it was."""
        fresh = [(k, t) for k, t in dict(entries).items() if k not in self._shingles]
        sets = [shingles(text, self.settings) for _, text in fresh]
        with self._lsh.insertion_session() as session:
            for (key, _), shingle_set, minhash in zip(
                fresh, sets, self._minhashes(sets), strict=True
            ):
                self._shingles[key] = shingle_set
                session.insert(key, minhash, check_duplication=False)

    def query(self, texts: Sequence[str]) -> list[list[Match]]:
        """For each normalized text, every indexed entry at or above the threshold, best first."""
        sets = [shingles(text, self.settings) for text in texts]
        out = []
        for shingle_set, minhash in zip(sets, self._minhashes(sets), strict=True):
            found = []
            for key in self._lsh.query(minhash):
                similarity = jaccard(shingle_set, self._shingles[key])
                if similarity >= self.settings.threshold:
                    found.append(Match(key, round(similarity, 4)))
            out.append(sorted(found, key=lambda m: (-m.similarity, m.key)))
        return out

    def _minhashes(self, sets: list[frozenset[bytes]]):
        from datasketch import MinHash

        if not sets:
            return []
        return MinHash.bulk([list(s) for s in sets], num_perm=self.settings.num_perm)


def near_duplicates(
    texts: Sequence[str], settings: NearDupSettings | None = None
) -> list[tuple[int, int, float]]:
    """Streaming dedup: ``(i, j, similarity)`` for each text ``i`` with a near-duplicate at
    an earlier position ``j`` (the best one). Texts equal after normalization count too.

    Equal texts are folded before hashing, so a set with many repeats costs its distinct texts.
    """
    first: dict[str, int] = {}
    pairs: list[tuple[int, int, float]] = []
    distinct: list[int] = []
    for i, text in enumerate(texts):
        if text in first:
            pairs.append((i, first[text], 1.0))
        else:
            first[text] = i
            distinct.append(i)
    index = PromptIndex(settings)
    index.insert((str(i), texts[i]) for i in distinct)
    for i, matches in zip(distinct, index.query([texts[i] for i in distinct]), strict=True):
        earlier = [m for m in matches if int(m.key) < i]
        if earlier:
            best = max(earlier, key=lambda m: (m.similarity, -int(m.key)))
            pairs.append((i, int(best.key), best.similarity))
    return sorted(pairs)
