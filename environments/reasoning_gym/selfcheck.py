"""Do not trust a reasoning-gym scorer until it passes a self-check; refuse the family if not.

reasoning-gym's 100+ families each bring their own ``score_answer``. Some are wrong in ways a
policy would find within a few GRPO steps (``game_of_life_halting`` gives 1.0 to any non-empty
string), some entries carry no answer to score. Before a family is used, ``self_check`` draws
``entries`` entries and demands, in order:

1. ``generates`` — the dataset builds and yields entries (no data download, no crash);
2. ``has_answers`` — every entry has a non-empty string answer;
3. ``reproducible`` — the same (config, seed, size) gives the same questions and answers: read
   again, from a second instance in reverse order, and in another interpreter with another
   string-hash seed (the verifier regenerates entries instead of storing them, in worker
   processes; knight_swap's entries change with the hash seed);
4. ``gold_scores_one`` — the gold answer, written as a policy would (``<answer>…</answer>``) and
   extracted back, scores exactly 1.0, twice;
5. ``rejects_garbage`` — the empty string, ``"0"`` (unless the gold answer is zero), a long seeded
   random string and the question echoed back each score at most ``GARBAGE_CEILING`` (0.5),
   and the scorer does not raise on them.

The first failed check names the family, the check and the entry. Results are cached by
(reasoning-gym version, family, config, seed, entries, ``CHECK_VERSION``): first the measured
table shipped with this folder (``families_checked.json``, all families, default configs), then
a user cache file (``GYMFLOW_RG_CACHE``, default ``~/.cache/gymflow/reasoning_gym_selfcheck.json``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.sessions import RequestError
from gymflow.environments.reasoning_gym.answer import answer_text, extract_answer

CHECK_VERSION = 2
"""Bump when the checks change: cached results of older checks are then ignored."""
GARBAGE_CEILING = 0.5
"""The most a garbage answer may score. Not merely below 1.0: knights_knaves gives 0.65 to its
own question echoed back, rotate_matrix 0.53, a reward a policy would learn to farm."""
CHECKS = ("generates", "has_answers", "reproducible", "gold_scores_one", "rejects_garbage")
SHIPPED = Path(__file__).resolve().parent / "families_checked.json"


@dataclass(frozen=True)
class CheckResult:
    family: str
    passed: bool
    failed_check: str | None
    detail: str
    config: dict
    seed: int
    entries: int
    seconds: float
    rg_version: str
    check_version: int = CHECK_VERSION


class ScorerRefused(GymflowError, RequestError):
    """``scorer_refused``: a :class:`GymflowError` for callers, a 422 with the kind from the
    resources server, and picklable with its kind, so it crosses the verifier's process pool
    (a plain ``GymflowError`` does not unpickle: its args hold only the message)."""

    def __init__(self, message: str) -> None:
        GymflowError.__init__(self, FailureKind.SCORER_REFUSED, message)
        self.status, self.message = 422, message

    def __reduce__(self):
        return (type(self), (self.message,))


def rg_version() -> str:
    return version("reasoning-gym")


@lru_cache(maxsize=256)
def _dataset(family: str, config_json: str, seed: int, size: int):
    import reasoning_gym  # heavy (~2 s of imports): only where a family is used

    return reasoning_gym.create_dataset(family, seed=seed, size=size, **json.loads(config_json))


def dataset(family: str, config: dict, seed: int, size: int):
    """The family's dataset, built once per process for each (config, seed, size)."""
    return _dataset(family, json.dumps(config, sort_keys=True), seed, size)


@lru_cache(maxsize=4096)
def _entry(family: str, config_json: str, seed: int, size: int, index: int) -> dict:
    return _dataset(family, config_json, seed, size)[index]


def entry(family: str, config: dict, seed: int, size: int, index: int) -> dict:
    """One entry, generated once per process (some families take seconds per puzzle, and a
    group of G rollouts verifies the same entry G times). Treat it as read-only."""
    return _entry(family, json.dumps(config, sort_keys=True), seed, size, index)


def fingerprints(family: str, config: dict, seed: int, entries: int) -> list[str]:
    """A hash of each entry's (question, answer), to compare entries across processes."""
    ds = dataset(family, config, seed, entries)
    blobs = (json.dumps([ds[i]["question"], ds[i]["answer"]]) for i in range(entries))
    return [hashlib.sha256(b.encode()).hexdigest()[:16] for b in blobs]


def fingerprints_elsewhere(
    families: list[str], config: dict, seed: int, entries: int, timeout_s: float = 600
) -> dict[str, list[str] | str]:
    """``fingerprints`` of each family computed in a fresh interpreter with another hash seed.

    The verifier regenerates entries in its worker processes; a family whose generator
    iterates over sets of strings (knight_swap) makes different entries there, because string
    hashes are salted per process. A family that fails there maps to its error text.
    """
    code = (
        "import json, sys\n"
        "from gymflow.environments.reasoning_gym.selfcheck import fingerprints\n"
        "families, config, seed, entries, out_path = json.loads(sys.argv[1])\n"
        "out = {}\n"
        "for f in families:\n"
        "    try:\n"
        "        out[f] = fingerprints(f, config, seed, entries)\n"
        "    except Exception as exc:\n"
        "        out[f] = f'{type(exc).__name__}: {exc}'[:200]\n"
        "open(out_path, 'w').write(json.dumps(out))\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": root}
    with tempfile.TemporaryDirectory() as tmp:  # a file, not stdout: some generators print
        out_path = os.path.join(tmp, "fingerprints.json")
        args = json.dumps([families, config, seed, entries, out_path])
        subprocess.run(
            [sys.executable, "-c", code, args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=True,
        )
        return json.loads(Path(out_path).read_text())


def garbage_answers(entry: dict, rng: random.Random) -> dict[str, str]:
    alphabet = string.ascii_letters + string.digits + " ,.()[]-+*/=\n"
    garbage = {
        "empty": "",
        "zero": "0",
        "random": "".join(rng.choice(alphabet) for _ in range(300)),
        "question_echoed": str(entry["question"]),
    }
    if is_zero_answer(str(entry["answer"])):
        del garbage["zero"]  # "0" is the right answer here ("0.0" too), not garbage
    return garbage


def is_zero_answer(answer: str) -> bool:
    try:
        return float(answer.strip()) == 0.0
    except ValueError:
        return False


def self_check(
    family: str,
    config: dict,
    seed: int = 1234,
    entries: int = 16,
    elsewhere: list[str] | str | None = None,
) -> CheckResult:
    """Run the checks on ``entries`` entries; the result says which check failed first.

    ``elsewhere``: the family's ``fingerprints`` from another process, when the caller computed
    them for many families at once; by default one subprocess is started for this family.
    """
    import reasoning_gym  # imported before the clock starts: seconds measure the family only

    started = time.monotonic()

    def result(failed: str | None, detail: str = "") -> CheckResult:
        seconds = round(time.monotonic() - started, 2)
        return CheckResult(
            family, failed is None, failed, detail, config, seed, entries, seconds, rg_version()
        )

    try:
        ds = dataset(family, config, seed, entries)
        rows = [ds[i] for i in range(entries)]
    except Exception as exc:
        return result("generates", f"{type(exc).__name__}: {str(exc)[:200]}")
    for i, entry in enumerate(rows):
        answer = entry.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            return result("has_answers", f"entry {i} has answer {answer!r}")
    try:  # another instance, read backwards, and this one again: order must not matter
        again = reasoning_gym.create_dataset(family, seed=seed, size=entries, **config)
        for i in reversed(range(entries)):
            for other in (again[i], ds[i]):
                if (other["question"], other["answer"]) != (rows[i]["question"], rows[i]["answer"]):
                    return result("reproducible", f"entry {i} differs when generated again")
        if elsewhere is None:
            elsewhere = fingerprints_elsewhere([family], config, seed, entries)[family]
    except Exception as exc:
        return result("reproducible", f"{type(exc).__name__}: {str(exc)[:200]}")
    if isinstance(elsewhere, str):
        return result("reproducible", f"fails in another process: {elsewhere}")
    here = fingerprints(family, config, seed, entries)
    differ = [i for i, (a, b) in enumerate(zip(here, elsewhere, strict=True)) if a != b]
    if differ:
        return result("reproducible", f"entries {differ[:5]} differ in another process (hash seed)")
    rng = random.Random(f"{family}-{seed}")
    for i, entry in enumerate(rows):
        extracted = extract_answer(answer_text(entry["answer"]))
        try:
            scores = [ds.score_answer(extracted, entry) for _ in range(2)]
        except Exception as exc:
            return result("gold_scores_one", f"entry {i}: scorer raised {type(exc).__name__}")
        if scores != [1.0, 1.0]:
            return result("gold_scores_one", f"entry {i}: gold scores {scores}")
        for name, text in garbage_answers(entry, rng).items():
            try:
                score = ds.score_answer(text, entry)
            except Exception as exc:
                return result("rejects_garbage", f"entry {i}: scorer raised {exc!r:.120} on {name}")
            if not score <= GARBAGE_CEILING:
                return result("rejects_garbage", f"entry {i}: {name} answer scores {score:.3g}")
    return result(None)


def _key(family: str, config: dict, seed: int, entries: int) -> str:
    blob = json.dumps(config, sort_keys=True)
    return f"{rg_version()}|{family}|{blob}|{seed}|{entries}|v{CHECK_VERSION}"


def _cache_file() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gymflow"
    return Path(os.environ.get("GYMFLOW_RG_CACHE", default / "reasoning_gym_selfcheck.json"))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or a torn one: the check is run again


def cached_self_check(
    family: str,
    config: dict,
    seed: int = 1234,
    entries: int = 16,
    elsewhere: list[str] | str | None = None,
) -> CheckResult:
    """``self_check`` through the shipped table and the user cache (then stored there)."""
    key = _key(family, config, seed, entries)
    for path in (SHIPPED, _cache_file()):
        if key in (known := _read(path)):
            return CheckResult(**known[key])
    found = self_check(family, config, seed, entries, elsewhere)
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    known = {**_read(path), key: asdict(found)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
    os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    return found


def require_trusted(family: str, config: dict, seed: int = 1234, entries: int = 16) -> None:
    """Raise :class:`ScorerRefused` naming the family and the failed check unless it passed."""
    found = cached_self_check(family, config, seed, entries)
    if not found.passed:
        raise ScorerRefused(
            f"reasoning-gym family {family!r} (config {config}) failed its self-check "
            f"{found.failed_check!r}: {found.detail}; it is not used",
        )
