"""Each arm's compute, counted one way: the SFT control's and GRPO's from their results (online
RFT counts its own, tests/test_rft.py). GRPO's token counts come from stored rollout rows, here
a real evaluation's, written through the one store."""

from __future__ import annotations

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import ROLLOUTS_DIR, read_parts
from gymflow.train.arm_compute import grpo_compute, sft_compute
from gymflow.train.grpo import GRPOSettings


def test_the_sft_control_trains_batch_size_demonstrations_a_step(micro_tool_call_model):
    tokenizer = TransformersPolicy.from_path(micro_tool_call_model).tokenizer
    demos = [{"prompt": "p", "completion": "12345"}, {"prompt": "q", "completion": "1"}]
    per_demo = sum(len(tokenizer(d["completion"], add_special_tokens=False)["input_ids"]) for d in demos) / 2  # fmt: skip
    c = sft_compute({"steps": 75, "wall_s": 120.5}, 32, demos, tokenizer)
    assert (c.arm, c.steps, c.updates, c.samples_generated) == ("sft_control", 75, 75, 0)
    assert c.examples_trained == 75 * 32 and c.tokens_trained == round(75 * 32 * per_demo)
    assert c.wall_s == 120.5 and c.curve == []
    assert sft_compute({"steps": 3, "wall_s": 1.0}, 8, demos).tokens_trained == 0


def test_grpo_counts_every_group_it_generated_and_the_tokens_it_stored(tmp_path):
    env = get_env("tool_call")
    tasks = build_tasks(env, 10, seed=0, heldout_frac=0.0, val_frac=0.0)
    policy = ScriptedPolicy(lambda prompt, turn, obs: "no call")
    evaluate_policy(env, build_app(env), policy, tasks, greedy=False, samples=2, out_dir=tmp_path)
    rows = read_parts(tmp_path / ROLLOUTS_DIR)
    settings = GRPOSettings(prompts_per_step=4, num_generations=8, num_iterations=2)
    result = {"steps": 5, "wall_s": 42.0, "dynamic_sampling": {"groups_generated": 27}}
    c = grpo_compute(result, settings, tmp_path / ROLLOUTS_DIR)
    assert (c.steps, c.updates, c.samples_generated) == (5, 5, 27 * 8)
    assert c.examples_trained == 3 * 4 * 8  # a batch sampled every 2nd step, trained twice
    assert c.tokens_generated == sum(sum(m) for m in rows["env_mask"].to_list()) > 0
    assert c.tokens_trained == 0  # an evaluation's rows are not trained on
    assert grpo_compute(result, settings).tokens_generated == 0  # no stored rollouts
