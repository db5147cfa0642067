"""Self-check every reasoning-gym family and record it.

    python -m gymflow.environments.reasoning_gym.measure_families

Writes ``families_checked.json`` beside this file (the measured table the self-check cache
reads first, keyed as in :mod:`gymflow.environments.reasoning_gym.selfcheck`) and prints a
markdown table for the README. Families are checked one after another in this process, each under a
wall-clock limit (``--limit-s``, SIGALRM): a family that takes longer is recorded as failing
``generates`` with a timeout, so one slow generator cannot stall the table. ``--families a,b``
measures only those; measured keys are kept, so the run can be resumed in chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from dataclasses import asdict

from gymflow.environments.reasoning_gym.selfcheck import (
    SHIPPED,
    CheckResult,
    _key,
    fingerprints_elsewhere,
    rg_version,
    self_check,
)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def measure(family: str, limit_s: int, seed: int, entries: int, elsewhere) -> CheckResult:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        return self_check(family, {}, seed, entries, elsewhere)
    except _Timeout:
        detail = f"no result within {limit_s} s"
        return CheckResult(
            family, False, "generates", detail, {}, seed, entries, limit_s, rg_version()
        )
    finally:
        signal.alarm(0)


def table(results: list[dict]) -> str:
    lines = ["| family | self-check | failed check: detail | s |", "|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r["family"]):
        verdict = "pass" if r["passed"] else "**refused**"
        why = "" if r["passed"] else f"{r['failed_check']}: {r['detail']}".replace("|", "/")
        lines.append(f"| {r['family']} | {verdict} | {why} | {r['seconds']} |")
    return "\n".join(lines)


def main() -> None:
    from reasoning_gym.factory import DATASETS

    parser = argparse.ArgumentParser()
    parser.add_argument("--families", default="", help="comma-separated; default: all")
    parser.add_argument("--limit-s", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--entries", type=int, default=16)
    parser.add_argument("--table", action="store_true", help="only print the table")
    args = parser.parse_args()
    known = json.loads(SHIPPED.read_text()) if SHIPPED.exists() else {}
    if not args.table:
        wanted = [f for f in args.families.split(",") if f] or sorted(DATASETS)
        if not args.families:
            wanted = [f for f in wanted if _key(f, {}, args.seed, args.entries) not in known]
        # one other interpreter fingerprints every family (instead of one per family)
        elsewhere = fingerprints_elsewhere(wanted, {}, args.seed, args.entries)
        for family in wanted:
            key = _key(family, {}, args.seed, args.entries)
            found = measure(family, args.limit_s, args.seed, args.entries, elsewhere[family])
            known[key] = asdict(found)
            print(family, known[key]["passed"], known[key]["failed_check"], flush=True)
            tmp = SHIPPED.with_name(f".{SHIPPED.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, SHIPPED)
    print(table(list(known.values())))


if __name__ == "__main__":
    main()
