"""A weighted mix of environments: how a budget is shared among them and how tasks are drawn.

A run on several environments (``LifecycleConfig.envs``) gives each environment its share of
every count (task drafts, demonstrations, validation tasks) by :func:`apportion`, and GRPO
draws each batch's tasks by :func:`draw_tasks`: every slot picks an environment by its weight,
then a task of that environment. A group is the G samples of one task, so a group never mixes
environments.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence


def apportion(n: int, weights: Mapping[str, float], minimum: int = 0) -> dict[str, int]:
    """``n`` shared by ``weights`` (largest remainder), in order. Each gets ``minimum`` first
    and its share of the rest (so the total stays ``n`` unless ``n`` is under the minimums).

    >>> apportion(10, {"tool_call": 0.5, "math": 0.3, "games": 0.2})
    {'tool_call': 5, 'math': 3, 'games': 2}
    >>> apportion(7, {"a": 0.5, "b": 0.5})
    {'a': 4, 'b': 3}
    >>> apportion(4, {"a": 0.9, "b": 0.1}, minimum=1)
    {'a': 3, 'b': 1}
    """
    total = sum(weights.values())
    if n < 0 or total <= 0:
        raise ValueError(f"apportion needs n >= 0 and positive weights, got {n} and {weights}")
    rest = max(0, n - minimum * len(weights))
    exact = {k: rest * w / total for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    by_remainder = sorted(exact, key=lambda k: (-(exact[k] - out[k]), list(weights).index(k)))
    for k in by_remainder[: rest - sum(out.values())]:
        out[k] += 1
    return {k: minimum + v for k, v in out.items()}


def draw_tasks(
    pools: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    n: int,
    rng: random.Random,
    exclude: set[str] = frozenset(),
) -> list[str]:
    """``n`` task ids: each slot draws an environment by ``weights`` (among those with a task
    left), then a task of it not drawn yet in this call nor in ``exclude``. Fewer than ``n``
    when the pools run out.

    >>> sorted(draw_tasks({"a": ["a-1", "a-2"], "b": ["b-1"]}, {"a": 0.5, "b": 0.5}, 5,
    ...                   random.Random(0)))
    ['a-1', 'a-2', 'b-1']
    """
    left = {env: [t for t in ids if t not in exclude] for env, ids in pools.items()}
    out: list[str] = []
    while len(out) < n:
        envs = [env for env in weights if left.get(env)]
        if not envs:
            break
        env = rng.choices(envs, weights=[weights[e] for e in envs])[0]
        out.append(left[env].pop(rng.randrange(len(left[env]))))
    return out
