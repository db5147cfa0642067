"""LLM-written task variants with ``gymflow policy serve`` as the teacher (a real process on
127.0.0.1, asked through the ``openai`` backend).

The served policy answers from a file of prepared replies (``scripted:replies=FILE``), since no
model here can write variants; what is under test is the product's side: the request, parsing,
the gold check through the environment's server, near-duplicate and leakage filtering, the counts
by verdict, and the wiring into ``gymflow tasks generate`` and the ``generate_tasks`` stage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policy_server import free_port, served_policy
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import GymflowError
from gymflow.core.task_record import Task, content_hash
from gymflow.data.coverage import task_facets
from gymflow.data.dedup import NearDupSettings, normalized_text
from gymflow.data.leakage import PromptRef
from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.task_variants import VariantSettings, add_variants

FORMAT = "\n\nPut the final answer in \\boxed{}."
MATH = get_env("math")


def _task(text: str, answer: str, solution: str, split: str) -> Task:
    prompt = [{"role": "user", "content": text + FORMAT}]
    truth = {"answer": answer, "solution": solution, "source": "generated", "level": 1}
    digest = content_hash(prompt, truth)
    return Task(
        task_id=f"math-{digest[:12]}", env="math", split=split, prompt=prompt, tools=[],
        ground_truth=truth, generator="math/1", seed=0, content_hash=digest,
    )  # fmt: skip


SUBTRACT = _task(
    "Ann had 9 pens and lost 2. How many pens does she have?", "7", "9 - 2 = \\boxed{7}", "train"
)
CUBE = _task("What is 12 * 12 * 12 * 12?", "20736", "12^4 = \\boxed{20736}", "train")
HELDOUT = _task("What is 42 + 25?", "67", "42 + 25 = \\boxed{67}", "heldout")
TASKS = [SUBTRACT, CUBE, HELDOUT]

GOOD_PARAPHRASE = "Ann lost 2 of her 9 pens. How many are left with her?" + FORMAT
GOOD_SCENARIO = "Tom has 13 apples and gives 5 away. How many are left?" + FORMAT


def _scenario(text: str, answer: str, boxed: str) -> dict:
    truth = {"answer": answer, "solution": f"... = \\boxed{{{boxed}}}", "level": 1}
    return {"kind": "scenario", "prompt": text + FORMAT, "ground_truth": truth}


SUBTRACT_REPLY = {
    "variants": [
        {"kind": "paraphrase", "prompt": GOOD_PARAPHRASE},  # kept
        {"kind": "scenario", "prompt": GOOD_SCENARIO,
         "ground_truth": {"answer": "8", "solution": "13 - 5 = \\boxed{8}", "level": 1}},  # kept
        _scenario("Tom has 14 apples and gives 5 away. How many are left?", "10", "9"),  # gold
        {"kind": "paraphrase", "prompt": SUBTRACT.prompt[0]["content"].upper()},  # the seed
        _scenario("What is 42 + 25?", "67", "67"),  # the held-out task, rewritten as new
        _scenario("Tom has 13 apples and gives 5 away; how many are left?", "8", "8"),  # repeat
        {"kind": "paraphrase", "prompt": "Ann lost 3 of her 9 pens. How many remain?" + FORMAT},
        {"kind": "translation", "prompt": "Anna hatte 9 Stifte."},  # not a kind asked
    ]
}  # fmt: skip
PER_TASK = len(SUBTRACT_REPLY["variants"])
CATCH_ALL = {"variants": [_scenario("What is 1000 + 1?", "1001", "1001")]}


@pytest.fixture(scope="module")
def replies(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("teacher") / "replies.jsonl"
    rows = [
        {"when": "Ann had 9 pens", "reply": json.dumps(SUBTRACT_REPLY)},
        {"when": "What is 12 * 12 * 12 * 12?", "reply": "Sure! Here are some variants: 1) ..."},
        {"reply": "```json\n" + json.dumps(CATCH_ALL) + "\n```"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def teacher(replies) -> str:
    """``gymflow policy serve`` of the prepared replies, as its own process: its spec."""
    with served_policy(f"scripted:replies={replies}", "teacher") as url:
        yield f"openai:{url}?model=teacher"


@pytest.mark.parametrize("where", ["served", "in-process"])
def test_only_variants_with_a_verified_gold_and_no_repeat_are_kept(teacher, replies, where):
    spec = teacher if where == "served" else f"scripted:replies={replies}"  # token-level backend
    settings = VariantSettings(teacher=spec, per_task=PER_TASK)
    report = add_variants(MATH, TASKS, settings, NearDupSettings())

    assert report.counts() == {
        "asked": 2 * PER_TASK, "kept": 2, "unparseable": PER_TASK + 1, "facts_changed": 1,
        "gold_rejected": 1, "near_duplicate": 3,
    }  # fmt: skip
    garbage = [c for c in report.candidates if c.seed is CUBE]
    assert len(garbage) == PER_TASK and {c.verdict for c in garbage} == {"unparseable"}
    assert "not a variants object: Expecting value at line 1 column 1" in garbage[0].detail
    verdicts = [(c.verdict, c.detail) for c in report.candidates if c.seed is SUBTRACT]
    assert [v for v, _ in verdicts] == [
        "kept", "kept", "gold_rejected", "near_duplicate", "near_duplicate", "near_duplicate",
        "facts_changed", "unparseable",
    ]  # fmt: skip
    assert "scored 0.0" in verdicts[2][1] and "wrong_answer" in verdicts[2][1]
    assert verdicts[3][1] == f"1.00 like {SUBTRACT.task_id} (train task)"
    assert f"like {HELDOUT.task_id} (heldout task)" in verdicts[4][1]
    assert "(variant kept earlier)" in verdicts[5][1]

    paraphrase, scenario = report.kept
    assert paraphrase.prompt == [{"role": "user", "content": GOOD_PARAPHRASE}]
    assert paraphrase.ground_truth["answer"] == "7"  # the seed's ground truth
    assert scenario.prompt[0]["content"] == GOOD_SCENARIO
    assert scenario.ground_truth["answer"] == "8"
    for task in report.kept:
        assert task.split == "train" and task.generator == f"llm_variant:{spec}"
        assert task.ground_truth["variant"]["teacher"] == spec
        assert task.ground_truth["variant"]["of"] == SUBTRACT.task_id
        assert task_facets(MATH, task)["source"] == "llm_variant"


def test_a_held_out_prompt_recorded_by_an_earlier_run_is_never_a_variant(teacher):
    recorded = PromptRef("old-task", normalized_text(GOOD_PARAPHRASE), "held out by run old")
    settings = VariantSettings(teacher=teacher, per_task=PER_TASK)
    report = add_variants(MATH, TASKS, settings, NearDupSettings(), [recorded])
    assert [t.prompt[0]["content"] for t in report.kept] == [GOOD_SCENARIO]
    (dropped,) = [c for c in report.candidates if c.detail.endswith("(held out by run old)")]
    assert dropped.task.prompt[0]["content"] == GOOD_PARAPHRASE
    assert report.counts()["near_duplicate"] == 4


def test_tasks_generate_adds_variants_to_train_only(teacher, tmp_path):
    out = tmp_path / "set"
    result = CliRunner().invoke(
        app,
        ["tasks", "generate", "--env", "math", "--n", "40", "--out", str(out),
         "--variants-from", teacher, "--variants-per-task", "1", "--variants-seeds", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # Every seed gets the catch-all scenario: the first is kept, the others repeat it.
    assert "variants: 3 asked, 1 kept, 0 unparseable, 0 facts_changed, 0 gold_rejected, " in (
        result.output
    )
    assert "2 near_duplicate" in result.output
    splits = {s: read_tasks(out / f"tasks-{s}.parquet") for s in ("train", "val", "heldout")}
    variants = {
        s: [t for t in tasks if t.ground_truth.get("source") == "llm_variant"]
        for s, tasks in splits.items()
    }
    assert [len(v) for v in variants.values()] == [1, 0, 0]
    assert variants["train"][0].prompt[0]["content"] == "What is 1000 + 1?" + FORMAT
    rows = [json.loads(line) for line in (out / "variants.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in rows] == ["kept", "near_duplicate", "near_duplicate"]
    coverage = json.loads((out / "coverage.json").read_text())
    (source,) = [r for r in coverage if r["facet"] == "source" and r["value"] == "llm_variant"]
    assert (source["train"], source["val"], source["heldout"]) == (1, 0, 0)


def test_a_bad_teacher_is_one_line_with_its_kind(tmp_path):
    runner = CliRunner()
    args = ["tasks", "generate", "--env", "math", "--n", "20", "--out", str(tmp_path)]
    unknown = runner.invoke(app, [*args, "--variants-from", "teacher:x"])
    assert unknown.exit_code == 2
    assert "[bad_request] variants.teacher: unknown policy backend 'teacher'" in unknown.output
    gone = f"openai:http://127.0.0.1:{free_port()}/v1?model=t&retries=0&timeout_s=2"
    down = runner.invoke(app, [*args, "--variants-from", gone])
    assert down.exit_code == 2 and "Traceback" not in down.output
    assert "[policy_unavailable] the variants teacher" in down.output
    assert not (tmp_path / "tasks-train.parquet").exists(), "nothing is written"


def test_a_replies_file_row_without_a_reply_is_refused_with_its_line(tmp_path):
    path = tmp_path / "replies.jsonl"
    path.write_text('{"reply": "ok"}\n{"when": "x"}\n')
    with pytest.raises(GymflowError, match=r"replies\.jsonl:2: a reply row is"):
        ScriptedPolicy.from_replies(path)


def test_generate_tasks_stage_logs_variants(gym_home, prefect_engine, teacher, tmp_path):
    from mlflow import MlflowClient
    from prefect import flow

    from gymflow.data.settings import TaskDataSettings
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.run_context import RunContext
    from gymflow.lifecycle.tracking import parent_run_id
    from gymflow.tasks.generate import generate_tasks

    ctx = RunContext(
        run_id="variants-run",
        run_dir=str(tmp_path / "variants-run"),
        home=str(gym_home),
        mlflow_parent_id=parent_run_id("variants-run"),
    )
    cfg = LifecycleConfig(
        env="math", n_tasks=40, task_data=TaskDataSettings(recorded_heldout=False),
        variants=VariantSettings(teacher=teacher, per_task=1, seeds=2),
    )  # fmt: skip

    @flow
    def only_generate() -> object:
        return generate_tasks(ctx, cfg)

    data = only_generate()
    assert {k: v for k, v in data.dedup.items() if k.startswith("variants_")} == {
        "variants_asked": 2, "variants_kept": 1, "variants_unparseable": 0,
        "variants_facts_changed": 0, "variants_gold_rejected": 0, "variants_near_duplicate": 1,
    }  # fmt: skip
    train = read_tasks(data.paths["train"])
    assert sum(t.ground_truth.get("source") == "llm_variant" for t in train) == 1
    report = json.loads(Path(data.coverage).read_text())
    (source,) = [
        r for r in report["rows"] if r["facet"] == "source" and r["value"] == "llm_variant"
    ]
    assert source["train"] == source["total"] == 1
    run = MlflowClient().get_run(data.stage.mlflow_run_id)
    assert run.data.params["variants_teacher"] == teacher
    assert run.data.metrics["dedup_variants_kept"] == 1
    logged = {a.path for a in MlflowClient().list_artifacts(run.info.run_id, "data")}
    assert "data/variants.jsonl" in logged
