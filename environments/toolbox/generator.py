"""Seeded toolbox tasks at four difficulty levels, a few of them on tools training never shows.

Each task shows a small toolbox (the tools it needs plus distractors, in a shuffled order) and
asks, in one user message, for what takes this many calls — its ``level``, the generator's
difficulty knob, which the curriculum steers (:mod:`gymflow.train.curriculum`):

* **0** — one call of a tool with flat arguments (``single``);
* **1** — one call with an object or array argument (``nested``), or a request no tool in the
  box can serve, to be declined in plain text (``refusal``, BFCL's irrelevance);
* **2** — two calls in one answer, any order (``parallel2``; sometimes one tool twice);
* **3** — three calls (``parallel3``).

Every ``UNSEEN_EVERY``-th draft needs at least one of the catalog's ``UNSEEN`` tools and is
held out (the environment fixes its split), so demonstrations and GRPO's pool never show those
tools. Ground truth is BFCL's shape (``category``, ``functions``, ``answer``: per call
``{name: {param: [allowed value]}}``, ``None`` to decline) plus ``level``, ``family`` and
``source`` (``seen`` / ``unseen``), the facets the coverage report reads.
"""

from __future__ import annotations

import random

from gymflow.environments.toolbox.catalog import NESTED, SEEN, UNSEEN, Tool

LEVEL_WEIGHTS = (0.2, 0.3, 0.3, 0.2)
"""How often each level is drawn (0, 1, 2, 3)."""
REFUSAL_SHARE = 0.3
"""Share of level-1 tasks that ask for something no tool in the box does."""
UNSEEN_EVERY = 12
"""One draft in this many is on unseen tools (and held out)."""
CONNECTORS = ("Also, ", "Then ", "And ")


def generate(n: int, seed: int) -> list[dict]:
    """``n`` task rows ``{"request", "functions", "answer", "category", "level", "family",
    "source"}``; deterministic in ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        level = rng.choices(range(len(LEVEL_WEIGHTS)), weights=LEVEL_WEIGHTS)[0]
        out.append(make_task(rng, level, unseen=i % UNSEEN_EVERY == UNSEEN_EVERY - 1))
    return out


def make_task(rng: random.Random, level: int, unseen: bool) -> dict:
    """One task of ``level``; with ``unseen``, at least one needed tool is an unseen one."""
    pool = UNSEEN if unseen else SEEN
    if level == 1 and rng.random() < REFUSAL_SHARE:
        return _refusal(rng, pool, unseen)
    if level <= 1:
        family = "nested" if level == 1 else "single"
        fits = [t for t in pool if (t.name in NESTED) == (level == 1)]
        needed = [rng.choice(fits)]
    else:
        family = f"parallel{level}"
        needed = [rng.choice(pool)]
        others = SEEN + UNSEEN if unseen else SEEN
        while len(needed) < level:
            needed.append(needed[-1] if rng.random() < 0.2 else rng.choice(others))
    sentences, answer = [], []
    for tool in needed:
        text, args = _fresh(rng, tool, answer)
        sentences.append(text)
        answer.append({tool.name: allowed(args)})
    box = _toolbox(rng, needed, unseen, size=max(3, min(4, len({t.name for t in needed}) + 1)))
    return _row(sentences, box, answer, "parallel_multiple" if level >= 2 else "multiple",
                level, family, unseen)  # fmt: skip


def allowed(args: dict) -> dict:
    """BFCL's possible answer for ``args``: each value its only allowed one (a dict's values
    each in a list too, as BFCL writes nested arguments)."""
    return {k: [{kk: [vv] for kk, vv in v.items()} if isinstance(v, dict) else v]
            for k, v in args.items()}  # fmt: skip


def _refusal(rng: random.Random, pool: list[Tool], unseen: bool) -> dict:
    asked = rng.choice(pool)
    text, _ = asked.make(rng)
    others = [t for t in SEEN if t.name != asked.name]
    box = rng.sample(others, 3)
    return _row([text], box, None, "irrelevance", 1, "refusal", unseen)


def _fresh(rng: random.Random, tool: Tool, answer: list[dict]) -> tuple[str, dict]:
    """A request for ``tool`` whose arguments differ from any call already in ``answer``."""
    taken = [a[tool.name] for a in answer if tool.name in a]
    while True:
        text, args = tool.make(rng)
        if allowed(args) not in taken:
            return text, args


def _toolbox(rng: random.Random, needed: list[Tool], unseen: bool, size: int) -> list[Tool]:
    box = list({t.name: t for t in needed}.values())
    names = {t.name for t in box}
    spare = [t for t in (SEEN + UNSEEN if unseen else SEEN) if t.name not in names]
    box += rng.sample(spare, size - len(box))
    rng.shuffle(box)
    return box


def _row(sentences, box, answer, category, level, family, unseen) -> dict:
    request = sentences[0]
    for text in sentences[1:]:
        request += " " + CONNECTORS[len(request) % len(CONNECTORS)] + text[0].lower() + text[1:]
    return {
        "request": request,
        "functions": [t.doc for t in box],
        "answer": answer,
        "category": category,
        "level": level,
        "family": family,
        "source": "unseen" if unseen else "seen",
    }
