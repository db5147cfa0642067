"""reasoning_gym: the answer format, the scorer self-check (real families that pass and fail it,
toy families registered through the library's own API), refusals with their kind, the
verifier's outcomes, and the contract through the real server (process-pool verifier)."""

from __future__ import annotations

import asyncio
import json
import pickle
from dataclasses import dataclass

import pytest
import reasoning_gym
from reasoning_gym.dataset import ProceduralDataset
from reasoning_gym.factory import DATASETS, register_dataset
from reasoning_gym.utils import extract_answer as library_extract

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.env.sessions import RequestError
from gymflow.environments.reasoning_gym import ReasoningGymEnvironment
from gymflow.environments.reasoning_gym import selfcheck as sc
from gymflow.environments.reasoning_gym.answer import answer_text, extract_answer
from gymflow.environments.reasoning_gym.settings import DEFAULT_FAMILIES, Family, RGSettings
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.env_check import check_environment
from gymflow.rollout.episode import Sampling


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_RG_CACHE", str(tmp_path / "selfcheck.json"))


# --- toy families, registered the way a reasoning-gym user adds one ---------------------------


@dataclass
class ToyConfig:
    seed: int | None = None
    size: int = 8


class ToyDataset(ProceduralDataset):
    """Questions "add a and b"; subclasses break the scorer in one way each."""

    def __init__(self, config: ToyConfig):
        super().__init__(config, config.seed, config.size)

    def __getitem__(self, idx: int) -> dict:
        a, b = (self.seed + idx) % 7 + 1, idx % 5 + 1
        return {"question": f"add {a} and {b}", "answer": str(a + b), "metadata": {}}

    def score_answer(self, answer, entry) -> float:
        if answer == "boom":
            raise ValueError("cannot read boom")
        return 1.0 if answer == entry["answer"] else 0.0


class RewardsAnything(ToyDataset):
    def score_answer(self, answer, entry) -> float:
        return 1.0 if answer else 0.0


class NoAnswers(ToyDataset):
    def __getitem__(self, idx: int) -> dict:
        return {**super().__getitem__(idx), "answer": None}


class Unseeded(ToyDataset):
    calls = 0

    def __getitem__(self, idx: int) -> dict:
        Unseeded.calls += 1
        return {**super().__getitem__(idx), "question": f"call {Unseeded.calls}"}


for _name, _cls in [
    ("toy_ok", ToyDataset),
    ("toy_rewards_anything", RewardsAnything),
    ("toy_no_answers", NoAnswers),
    ("toy_unseeded", Unseeded),
]:
    if _name not in DATASETS:
        register_dataset(_name, _cls, ToyConfig)


def toy_env(name: str = "toy_ok") -> ReasoningGymEnvironment:
    """An environment over a toy family, its self-check cached with in-process fingerprints
    (another interpreter does not have the toys registered)."""
    settings = RGSettings(families=[Family(name=name)], dataset_size=50)
    here = sc.fingerprints(name, {}, settings.check_seed, settings.check_entries)
    sc.cached_self_check(name, {}, settings.check_seed, settings.check_entries, here)
    return ReasoningGymEnvironment(settings)


def answered(task, text: str) -> list[dict]:
    return prompt_items(task.prompt) + assistant_items(text, 0)


# --- answer format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "<answer>12</answer>",
        "x <answer> 12 </answer> y <answer>\n13\n</answer>",
        "<answer>a\nb</answer>",
        "<answer></answer>",
        "no block",
        "<answer>open",
        "<answer>  two spaces  </answer>",
    ],
)
def test_extraction_agrees_with_reasoning_gym(text):
    assert extract_answer(text) == library_extract(text)


# --- the self-check ---------------------------------------------------------------------------


REAL_FAMILIES = {
    "leg_counting": None,
    "game_of_life_halting": "rejects_garbage",  # any non-empty string scores 1.0
    "coin_flip": "rejects_garbage",  # "0" scores 1.0 against 0.996
    "boxnet": "has_answers",
    "composite": "generates",  # needs a list of datasets
    "knight_swap": "reproducible",  # entries change with the string-hash seed
}
TOY_FAMILIES = {
    "toy_ok": None,
    "toy_rewards_anything": "rejects_garbage",
    "toy_no_answers": "has_answers",
    "toy_unseeded": "reproducible",
}


@pytest.fixture(scope="module")
def elsewhere() -> dict:
    """Fingerprints of the real families from one other interpreter (the toys exist only here)."""
    return sc.fingerprints_elsewhere(list(REAL_FAMILIES), {}, 1234, 4)


@pytest.mark.parametrize("family, failed", list(REAL_FAMILIES.items()))
def test_self_check_on_real_families(family, failed, elsewhere):
    found = sc.self_check(family, {}, seed=1234, entries=4, elsewhere=elsewhere[family])
    assert (found.passed, found.failed_check) == (failed is None, failed), found.detail


@pytest.mark.parametrize("family, failed", list(TOY_FAMILIES.items()))
def test_self_check_on_toy_families(family, failed):
    try:
        here = sc.fingerprints(family, {}, 1234, 4)
    except Exception as exc:  # a family that cannot generate: the check must say so too
        here = str(exc)
    found = sc.self_check(family, {}, seed=1234, entries=4, elsewhere=here)
    assert (found.passed, found.failed_check) == (failed is None, failed), found.detail


def test_a_family_unknown_to_another_process_is_not_reproducible():
    found = sc.self_check("toy_ok", {}, seed=1234, entries=2)  # the subprocess has no toys
    assert found.failed_check == "reproducible" and "another process" in found.detail


def test_a_zero_gold_answer_is_not_garbage():
    assert sc.is_zero_answer("0.0") and sc.is_zero_answer(" 0 ") and not sc.is_zero_answer("0x")
    entry = {"question": "q", "answer": "0.0"}
    assert "zero" not in sc.garbage_answers(entry, __import__("random").Random(0))


def test_the_shipped_table_covers_every_family_at_this_version():
    table = json.loads(sc.SHIPPED.read_text())
    measured = {r["family"]: r for r in table.values() if r["rg_version"] == sc.rg_version()}
    real = {name for name in DATASETS if not name.startswith("toy_")}
    assert set(measured) == real and len(real) >= 100
    for family in ("game_of_life_halting", "coin_flip", "knight_swap", "knights_knaves"):
        assert not measured[family]["passed"], family
    assert all(measured[f.name]["passed"] for f in DEFAULT_FAMILIES)


def test_results_are_cached_and_a_failed_family_is_refused_by_name(monkeypatch):
    found = sc.cached_self_check("game_of_life_halting", {}, 99, 2)  # not in the shipped table
    assert (found.passed, found.failed_check) == (False, "rejects_garbage")

    def must_not_run(*args):
        raise AssertionError("the cached result should have been used")

    monkeypatch.setattr(sc, "self_check", must_not_run)
    assert sc.cached_self_check("game_of_life_halting", {}, 99, 2) == found
    with pytest.raises(GymflowError, match="'game_of_life_halting'.*'rejects_garbage'") as raised:
        sc.require_trusted("game_of_life_halting", {}, 99, 2)
    assert raised.value.kind is FailureKind.SCORER_REFUSED
    # the shipped table answers for real families without running anything
    assert sc.cached_self_check("leg_counting", {}, 1234, 16).passed


def test_a_mix_with_a_refused_family_is_not_generated():
    env = ReasoningGymEnvironment(
        RGSettings(families=[Family(name="leg_counting"), Family(name="coin_flip")])
    )
    with pytest.raises(GymflowError, match="coin_flip") as raised:
        env.generate(5, 1)
    assert raised.value.kind is FailureKind.SCORER_REFUSED


def test_scorer_refused_keeps_its_kind_across_processes():
    again = pickle.loads(pickle.dumps(sc.ScorerRefused("family x failed")))
    assert isinstance(again, GymflowError) and isinstance(again, RequestError)
    assert (again.kind, again.status, again.message) == ("scorer_refused", 422, "family x failed")


# --- the verifier -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(
        ReasoningGymEnvironment(RGSettings()), 30, seed=3, heldout_frac=0, val_frac=0
    )


def test_gold_scores_one_and_probes_stay_under_their_ceilings(tasks):
    env = ReasoningGymEnvironment()
    assert {t.ground_truth["family"] for t in tasks} >= {"leg_counting", "chain_sum"}
    for task in tasks:
        gold = env.verify(task, answered(task, env.gold_text(task)))
        assert (gold.reward, gold.success, gold.failure_kind) == (1.0, True, None)
        for probe in env.probes(task):
            score = env.verify(task, answered(task, probe.text))
            assert score.reward <= probe.max_reward and not score.success, probe.name


def test_outcomes_and_their_kinds():
    env = toy_env()
    task = build_tasks(env, 1, seed=4, heldout_frac=0, val_frac=0)[0]
    gold = task.ground_truth["answer"]
    cases = {
        "no block": (0.0, FailureKind.NO_ANSWER),
        answer_text(""): (0.0, FailureKind.NO_ANSWER),
        render_call("calculator", {"x": 1}): (0.0, FailureKind.NO_ANSWER),
        answer_text("99"): (0.0, FailureKind.WRONG_ANSWER),
        answer_text("boom"): (0.0, FailureKind.WRONG_ANSWER),  # the scorer raised
        f"thinking… {answer_text('1')} no, {answer_text(gold)}": (1.0, None),
    }
    for text, (reward, kind) in cases.items():
        score = env.verify(task, answered(task, text))
        assert (score.reward, score.failure_kind) == (reward, kind), text
    assert "raised ValueError" in env.verify(task, answered(task, answer_text("boom"))).detail


def test_a_task_from_another_version_or_a_changed_generator_is_refused():
    env = toy_env()
    task = build_tasks(env, 1, seed=4, heldout_frac=0, val_frac=0)[0]
    old = task.model_copy(update={"ground_truth": {**task.ground_truth, "rg_version": "0.1.0"}})
    with pytest.raises(GymflowError, match="0.1.0") as raised:
        env.verify(old, answered(old, env.gold_text(old)))
    assert raised.value.kind is FailureKind.SCORER_REFUSED
    moved = task.model_copy(update={"ground_truth": {**task.ground_truth, "index": 7}})
    with pytest.raises(GymflowError, match="different question"):
        env.verify(moved, answered(moved, env.gold_text(moved)))


def test_settings_come_from_the_config_file(tmp_path, monkeypatch):
    path = tmp_path / "rg.json"
    path.write_text(json.dumps({"families": [{"name": "gcd", "weight": 2}], "dataset_size": 20}))
    monkeypatch.setenv("GYMFLOW_REASONING_GYM_CONFIG", str(path))
    env = ReasoningGymEnvironment()
    drafts = env.generate(6, 1)
    assert {d.ground_truth["family"] for d in drafts} == {"gcd"}
    assert all(d.ground_truth["index"] < 20 for d in drafts)
    assert (
        reasoning_gym.create_dataset("gcd", seed=1, size=20)[drafts[0].ground_truth["index"]][
            "question"
        ]
        in drafts[0].prompt[0]["content"]
    )


# --- through the real server ------------------------------------------------------------------


def test_env_check_passes_through_the_server():
    golds, probes, problems = check_environment(ReasoningGymEnvironment(), 10)
    assert problems == [] and golds >= 9 and probes >= 6 * golds


def test_a_refused_family_is_refused_through_the_process_pool(tasks):
    env = ReasoningGymEnvironment()
    task = tasks[0]
    forged = task.model_copy(
        update={"ground_truth": {**task.ground_truth, "family": "game_of_life_halting"}}
    )
    app = build_app(env, verify_workers=1)

    async def go():
        async with EnvClient(app=app) as client:
            policy = ScriptedPolicy.replay(["<answer>True</answer>"])
            return await run_episodes(
                client, env, policy, [forged], Sampling(max_completion_tokens=1 << 20), [0]
            )

    try:
        with pytest.raises(GymflowError, match="game_of_life_halting") as raised:
            asyncio.run(go())
    finally:
        app.state.verifier.shutdown()
    assert raised.value.kind is FailureKind.SCORER_REFUSED
    assert not app.state.sessions.live
