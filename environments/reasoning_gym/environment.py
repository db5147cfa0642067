"""The reasoning_gym environment: any reasoning-gym family as a one-turn task with its scorer.

A task is one entry of ``reasoning_gym.create_dataset(family, seed=, size=, **config)``: the
prompt is its question plus the answer-format instruction; the ground truth names the entry
(family, config, dataset seed and size, index), the library version, and the gold answer. The
verifier regenerates the entry (entries are not stored: their metadata is whatever the family
needs, not always JSON) and checks that its question is the task's, extracts the reply's last
``<answer>…</answer>`` (:mod:`gymflow.environments.reasoning_gym.answer`) and returns the
family's own ``score_answer``: partial credit as the family gives it, success only at 1.0.

A family is used only after it passed :mod:`gymflow.environments.reasoning_gym.selfcheck`;
otherwise generation and verification refuse with ``scorer_refused``, naming the family and the
check. A task made with another reasoning-gym version is refused the same way (its entry may
differ). Entries with an empty answer (``ab`` has a few: the program reduces to nothing) are
skipped at generation, since ``<answer></answer>`` cannot be told from no answer. Outcomes: no
answer block or an empty one is ``no_answer`` (the scorer is not asked); below 1.0 is
``wrong_answer``; a scorer that raises on a reply scores it 0 as ``wrong_answer`` with the
exception in the detail (the self-check showed it handles garbage, so a raise means a reply it
cannot read); a score outside [0, 1] is refused as a scorer fault.

``heavy_verify``: the library is heavy to import and some scorers (sympy) are slow, so the
server verifies in its process pool.
"""

from __future__ import annotations

import math
import random

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.trajectory import final_assistant_text
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.reasoning_gym.answer import INSTRUCTION, answer_text, extract_answer
from gymflow.environments.reasoning_gym.selfcheck import (
    ScorerRefused,
    dataset,
    is_zero_answer,
    require_trusted,
    rg_version,
)
from gymflow.environments.reasoning_gym.selfcheck import entry as cached_entry
from gymflow.environments.reasoning_gym.settings import RGSettings

ENTRY_KEYS = ("dataset_seed", "dataset_size", "index")


class ReasoningGymEnvironment(Environment):
    name = "reasoning_gym"
    version = "1"
    max_turns = 1
    heavy_verify = True

    def __init__(self, settings: RGSettings | None = None) -> None:
        self.settings = settings or RGSettings.from_env()

    def tools(self):
        return []

    def _trusted(self, family: str, config: dict) -> None:
        s = self.settings
        require_trusted(family, config, s.check_seed, s.check_entries)

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        """``n`` entries drawn over the weighted families; refuses if any family fails its check."""
        s = self.settings
        for family in s.families:
            self._trusted(family.name, family.config)
        rng = random.Random(seed)
        picks = rng.choices(s.families, weights=[f.weight for f in s.families], k=n)
        drafts = []
        for family in picks:
            ds = dataset(family.name, family.config, seed, s.dataset_size)
            for _ in range(100):  # an empty answer cannot be told from none: draw another
                index = rng.randrange(s.dataset_size)
                entry = ds[index]
                if isinstance(entry["answer"], str) and entry["answer"].strip():
                    break
            else:
                raise _refused(f"{family.name}: 100 draws in a row had no answer")
            truth = {
                "family": family.name,
                "config": family.config,
                "dataset_seed": seed,
                "dataset_size": s.dataset_size,
                "index": index,
                "rg_version": rg_version(),
                "answer": entry["answer"],
            }
            prompt = [{"role": "user", "content": f"{entry['question']}\n\n{INSTRUCTION}"}]
            drafts.append(TaskDraft(prompt, truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        truth = task.ground_truth
        family, config = truth["family"], truth["config"]
        if truth["rg_version"] != rg_version():
            raise _refused(
                f"task {task.task_id} was made with reasoning-gym {truth['rg_version']}, "
                f"{rg_version()} is installed: its entry may differ"
            )
        self._trusted(family, config)
        ds = dataset(family, config, truth["dataset_seed"], truth["dataset_size"])
        entry = cached_entry(family, config, *(truth[k] for k in ENTRY_KEYS))
        if not task.prompt[-1]["content"].startswith(entry["question"]):
            raise _refused(f"task {task.task_id}: {family} regenerates a different question")
        answer = extract_answer(final_assistant_text(items))
        if not answer:
            return Score(0.0, False, FailureKind.NO_ANSWER, {}, "no <answer>…</answer> block")
        try:
            reward = ds.score_answer(answer, entry)
        except Exception as exc:
            detail = f"the {family} scorer raised {type(exc).__name__}: {str(exc)[:120]}"
            return Score(0.0, False, FailureKind.WRONG_ANSWER, {"scorer_raised": 1.0}, detail)
        if not isinstance(reward, int | float) or math.isnan(reward) or not 0 <= reward <= 1:
            raise _refused(f"the {family} scorer returned {reward!r}, not a number in [0, 1]")
        reward = float(reward)
        if reward == 1.0:
            return Score(1.0, True, None, {"score": 1.0}, "")
        return Score(reward, False, FailureKind.WRONG_ANSWER, {"score": reward}, "")

    def gold_text(self, task: Task) -> str:
        return answer_text(task.ground_truth["answer"])

    def probes(self, task: Task) -> list[Probe]:
        """Reward-leakage checks: none may succeed, and garbage stays at or under half credit."""
        gold = task.ground_truth["answer"]
        question = task.prompt[-1]["content"].rsplit("\n\n", 1)[0]
        rng = random.Random(task.content_hash)
        noise = "".join(rng.choice("abcdefghij0123456789 ,.-") for _ in range(300))
        probes = [
            Probe("empty", "", 0.0),
            Probe("no_answer_block", gold, 0.0),
            Probe("empty_block", answer_text(""), 0.0),
            Probe("random", answer_text(noise), 0.5),
            Probe("question_echoed", answer_text(question), 0.5),
            Probe("gold_then_wrong_block", answer_text(gold) + answer_text(noise[:20]), 0.5),
        ]
        if not is_zero_answer(gold):
            probes.append(Probe("zero", answer_text("0"), 0.5))
        return probes


def _refused(message: str) -> ScorerRefused:
    return ScorerRefused(message)
