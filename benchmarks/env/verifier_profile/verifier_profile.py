"""Verifier profiling benchmark: wall seconds to profile 100 samples, one row per environment.

    python benchmarks/env/verifier_profile/verifier_profile.py [--samples 100] [--envs a,b] [--out FILE]

Per environment, what the ``profile_verifier`` stage does, timed from loading the policy to the
report: the embedded tiny model of the smoke config (built once beforehand, untimed, as
``resolve_policy`` does) samples at temperature 1 through the in-process server, gold episodes
and probes are replayed, and every sample is scored in each of two spawned processes. The
judge environment is graded by the reference judge served on loopback. Also per row: the
samples by source, the problems found (a sound environment has none), verify latency (p50 /
max ms in the first scoring process) and the stage's parts (``policy_load_s``,
``profile_s``). Target: ``wall_s`` <= 30 for every environment.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

# this file's folder would shadow the standard library's ``profile`` (which torch imports)
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.common import arguments, emit  # noqa: E402

TARGET_S = 30.0


def profile_env(name: str, samples: int, cache: Path) -> dict:
    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.eval.profile_report import profile_summary
    from gymflow.eval.profiling import profile_verifier
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.policy.tiny_model import ensure_tiny_model, tokenizer_corpus
    from gymflow.policy.transformers_backend import TransformersPolicy
    from gymflow.rollout.episode import Sampling

    cfg = LifecycleConfig.smoke()
    env = get_env(name)
    tm = cfg.tiny_model
    model = ensure_tiny_model(
        cache, name, lambda: tokenizer_corpus(env, tm.corpus_size, tm.seed + 12345), tm
    )
    split = build_tasks(env, cfg.n_tasks, cfg.task_seed, cfg.heldout_frac, cfg.val_frac)
    tasks = [t for t in split if t.split == "val"] or [t for t in split if t.split == "train"]
    started = time.perf_counter()
    policy = TransformersPolicy.from_path(str(model))
    loaded = time.perf_counter()
    sampling = Sampling(max_new_tokens=cfg.max_new_tokens, temperature=cfg.grpo.temperature)
    report = profile_verifier(env, tasks, samples, cfg.seed, policy, sampling)
    done = time.perf_counter()
    summary = profile_summary(report, env.reward_range)
    latency = summary["verify_latency_ms"]["first_process"]
    return {
        "wall_s": round(done - started, 2),
        "policy_load_s": round(loaded - started, 2),
        "profile_s": round(done - loaded, 2),
        **summary["timings_s"],
        "n": summary["n"],
        "sources": summary["sources"],
        "deterministic": summary["determinism"]["differing"] == 0,
        "problems": len(summary["problems"]),
        "first_problem": (summary["problems"] or [None])[0],
        "verify_ms_p50": latency["p50"],
        "verify_ms_max": latency["max"],
        "within_target": done - started <= TARGET_S,
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--samples", type=int, default=100, help="samples per environment")
    parser.add_argument("--envs", default="", help="comma-separated names (default: all)")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.samples, args.envs = 10, "counter"
    from gymflow.env.loopback import serve_on_loopback
    from gymflow.env.registry import list_envs
    from gymflow.environments.judge.reference_judge import reference_judge_app

    names = [n for n in args.envs.split(",") if n] or list_envs()
    rows = {}
    with tempfile.TemporaryDirectory() as cache, serve_on_loopback(reference_judge_app()) as url:
        os.environ.setdefault("GYMFLOW_JUDGE_URL", url + "/v1")  # scoring processes inherit it
        for name in names:
            rows[name] = profile_env(name, args.samples, Path(cache))
    result = {
        "profile_100_samples": rows,
        "target_s": TARGET_S,
        "all_within_target": all(r["within_target"] for r in rows.values()),
        "machine": f"{os.cpu_count()} CPU cores (shared), {platform.python_implementation()} "
        f"{platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
    }
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
