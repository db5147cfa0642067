"""The run's evaluations on the vLLM engine (``eval_engine: "vllm"``, vLLM's CPU build).

Three checkpoints of the vLLM tests' tiny model (``tests/vllm_model.py``): the model as built
(random: its greedy completions are arbitrary token strings), ``chatty`` (steered to write "a"
at every position) and ``silent`` (steered to end at once), made by
``tests/steered_model.py``. Their weights differ (the steering moves the
tied embedding, the tensor vLLM's plain reload leaves stale), their shapes and tokenizer do not,
so one engine serves all three by switching weights. The proofs, against transformers on the
same checkpoint (greedy, fp32):

* :class:`EvalEngine` asked for the checkpoints in turn gives each one transformers' greedy
  tokens, with one engine process switched in place; a checkpoint of another model gets a new
  engine, started after the old one ended; ``close`` ends it;
* the real ``baseline_eval`` and ``heldout_gate`` stages with ``eval_engine: "vllm"`` (the gate
  evaluates the start, the candidate and the control batch by batch, interleaved) store, for
  every label, the same episodes token for token as the same stages on transformers, each
  naming ``vllm:PATH``; no engine process outlives its stage;
* a combination that cannot work is refused in one ``bad_config`` line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest
from steered_model import steered
from vllm_model import needs_vllm, vllm_env_missing, vllm_tiny_model

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.eval.eval_engine import EvalEngine
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_config import run_config
from gymflow.lifecycle.stage_results import Checkpoint
from gymflow.rollout.store import read_rollouts

ENV = get_env("tool_call")
TOKENS = 12
LABELS = {"baseline": "base", "candidate": "chatty", "sft_control": "silent"}
"""The gate's folder label of each checkpoint."""


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    from transformers import AutoTokenizer

    base = vllm_tiny_model(tmp_path_factory.mktemp("vllm-eval"))
    tokenizer = AutoTokenizer.from_pretrained(base)
    folder = tmp_path_factory.mktemp("policies")
    a = tokenizer("a", add_special_tokens=False)["input_ids"][0]
    return {
        "base": str(base),
        "chatty": steered(base, a, folder / "chatty"),
        "silent": steered(base, tokenizer.eos_token_id, folder / "silent"),
    }


def _engine_processes() -> list[psutil.Process]:
    """This test process's live ``vllm serve`` engines."""
    out = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and "vllm.entrypoints" in " ".join(
                process.cmdline()
            ):
                out.append(process)
        except psutil.Error:  # ended meanwhile
            pass
    return out


def _greedy(policy, prompts) -> list[list[int]]:
    return [g.token_ids for g in policy.generate(prompts, TOKENS, greedy=True)]


@needs_vllm
def test_one_engine_switches_between_checkpoints_each_with_its_own_tokens(checkpoints, tmp_path):
    from gymflow.policy.transformers_backend import TransformersPolicy

    tasks = build_tasks(ENV, 4, seed=2, heldout_frac=0.0, val_frac=0.0)
    other = tmp_path / "other-model"  # same weights, another model: rms_norm_eps differs
    shutil.copytree(checkpoints["base"], other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"rms_norm_eps": 1e-3}))
    order = ["base", "chatty", "silent", "base", "chatty"]
    got: dict[str, list] = {}
    with EvalEngine("vllm") as engine:
        prompts = [engine.policy(checkpoints["base"]).encode_prompt(t.prompt, t.tools)
                   for t in tasks]  # fmt: skip
        for name in order:
            got.setdefault(name, []).append(_greedy(engine.policy(checkpoints[name]), prompts))
        first = engine.engine.process
        assert (engine.starts, engine.switches) == (1, len(order) - 1)
        engine.policy(other).generate(prompts[:1], 2, greedy=True)
        assert engine.starts == 2 and first.poll() is not None  # the first ended before
        assert len(_engine_processes()) == 1
        second = engine.engine.process
    assert second.poll() is not None and not _engine_processes()
    for name, runs in got.items():
        want = _greedy(TransformersPolicy.from_path(checkpoints[name]), prompts)
        assert all(run == want for run in runs), f"{name}: vLLM's greedy tokens are not its own"
    distinct = {json.dumps(runs[0]) for runs in got.values()}
    assert len(distinct) == 3  # three different policies, so a mixed-up switch would show
    assert {len(ids) for ids in got["chatty"][0]} == {TOKENS}
    assert {len(ids) for ids in got["silent"][0]} == {1}


def _stages(gym_home, folder: Path, engine: str, checkpoints, data=None):
    """``baseline_eval`` and ``heldout_gate`` of one run on ``engine``: its rollouts by label."""
    from gymflow.lifecycle.run_context import open_run
    from gymflow.tasks.evaluate import baseline_eval
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks

    cfg = LifecycleConfig(
        env="tool_call", n_tasks=200, heldout_frac=0.2, heldout_n=16, val_eval_n=2,
        max_new_tokens=TOKENS, registered_model="gymflow-vllm-eval-test", eval_engine=engine,
        gate={"batch": 8, "min_n": 8, "general_envs": []},
    )  # fmt: skip
    run = open_run(gym_home, folder, cfg)
    data = data or generate_tasks.fn(run, cfg)
    start = Checkpoint(path=checkpoints["base"])
    baseline_eval.fn(run, cfg, data, start)
    heldout_gate.fn(run, cfg, data, start, Checkpoint(path=checkpoints["chatty"]),
                    Checkpoint(path=checkpoints["silent"]))  # fmt: skip
    folders = {"val-current": "base"} | {f"heldout-{k}": v for k, v in LABELS.items()}
    out = {}
    for name, checkpoint in folders.items():
        rows = read_rollouts(run.dir / "eval" / name).sort("task_id")
        assert set(rows["policy"]) == {f"{engine}:{checkpoints[checkpoint]}"}
        out[name] = dict(zip(rows["task_id"], rows["completion_ids"].to_list(), strict=True))
    return out, data


@needs_vllm
def test_baseline_and_gate_run_on_vllm_each_label_scored_by_its_own_weights(
    gym_home, tmp_path, checkpoints
):
    on_transformers, data = _stages(gym_home, tmp_path / "on-transformers", "transformers",
                                    checkpoints)  # fmt: skip
    on_vllm, _ = _stages(gym_home, tmp_path / "on-vllm", "vllm", checkpoints, data)
    assert not _engine_processes()  # each stage ended its engine
    assert on_vllm.keys() == on_transformers.keys()
    for name, episodes in on_vllm.items():
        assert len(episodes) >= (16 if name.startswith("heldout") else 2)
        assert episodes == on_transformers[name], f"{name}: not the episodes of its own weights"
    assert on_vllm["heldout-candidate"] != on_vllm["heldout-baseline"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"eval_engine": "vllm", "agent_servers": ["http://127.0.0.1:1"]},
         'eval_engine "vllm" runs the evaluations in this process'),
        ({"eval_engine": "vllm", "tiny_model": {"hidden_size": 64, "intermediate_size": 64}},
         "the embedded model has attention heads 16 wide and vLLM's CPU build needs 32"),
        ({"eval_engine": "vLLM"}, "eval_engine: input should be 'transformers' or 'vllm'"),
    ],
)  # fmt: skip
def test_an_evaluation_engine_that_cannot_work_is_refused_in_one_line(overrides, message):
    if "tiny_model" in overrides:
        if (why := vllm_env_missing()) is not None:
            pytest.skip(why)
        from gymflow.policy.vllm_engine import on_cuda

        if on_cuda():
            pytest.skip("narrow heads are a limit of vLLM's CPU build")
    with pytest.raises(GymflowError) as caught:
        run_config(overrides=overrides)
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert message in caught.value.detail
    assert "\n" not in str(caught.value)


def test_a_missing_vllm_environment_is_refused_before_any_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_VLLM_ENV", str(tmp_path / "nowhere"))
    with pytest.raises(GymflowError) as caught:
        run_config(overrides={"eval_engine": "vllm"})
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert caught.value.detail.startswith('eval_engine "vllm": no vLLM environment at')
    assert "make setup-vllm" in caught.value.detail
