"""Checkpoints of the shapes users bring, through the product's own entry points.

Random-init Llama-, Qwen3- and GPT-NeoX-shaped checkpoints with locally trained tokenizers and
their families' kinds of chat template (``tests/user_checkpoints.py``) are evaluated with
``gymflow eval --policy transformers:PATH``, fine-tuned 2 SFT steps and trained 2 GRPO steps
with the trainers the lifecycle runs, and one goes through a whole ``gymflow`` lifecycle as
``model_path``. Checkpoints gymflow cannot drive (no chat template; tool calls written as bare
JSON) are refused in one kinded line before any work, by ``gymflow eval`` and ``gymflow run``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner
from user_checkpoints import SHAPES, corpus, save_checkpoint

from gymflow.cli.main import app
from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.environments.tool_call.environment import ToolCallEnvironment
from gymflow.policy.checkpoints import ADAPTED_FILE, checkpoint_folder
from gymflow.rollout.store import read_rollouts

USABLE = ["llama", "qwen3", "neox"]
TURN_END = {"llama": "<|eot_id|>", "qwen3": "<|im_end|>", "neox": "<|endoftext|>"}
"""The token each shape's template ends an assistant turn with (the EOS gymflow must use)."""
runner = CliRunner()


def gymflow(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def checkpoints(gym_home, tmp_path_factory) -> dict[str, Path]:
    """Every shape saved once (~0.2 s each after the imports)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 32-wide models gain nothing from 2 threads on a shared CPU
    texts = corpus([get_env("tool_call"), get_env("counter")])
    root = tmp_path_factory.mktemp("user-checkpoints")
    yield {shape: save_checkpoint(shape, root / shape, texts) for shape in SHAPES}
    torch.set_num_threads(threads)


def used_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint_folder(path))


def moved(a: Path, b: Path) -> float:
    """Largest absolute weight change between two saved models (both must load)."""
    from transformers import AutoModelForCausalLM

    x = AutoModelForCausalLM.from_pretrained(a).state_dict()
    y = AutoModelForCausalLM.from_pretrained(b).state_dict()
    assert x.keys() == y.keys()
    return max(float((x[k] - y[k]).abs().max()) for k in x)


@pytest.mark.parametrize("shape", USABLE)
def test_gymflow_eval_renders_prompts_with_the_checkpoints_template(checkpoints, tmp_path, shape):
    from gymflow.data.task_table import read_tasks

    out = tmp_path / "eval"
    result = gymflow(
        "eval", "--env", "tool_call", "--policy", f"transformers:{checkpoints[shape]}",
        "--split", "val", "--limit", 6, "--out", out, "--no-mlflow",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = read_rollouts(out)
    assert rows.height == 6 and rows["reward"].null_count() == 0
    tokenizer = used_tokenizer(checkpoints[shape])
    assert tokenizer.eos_token == TURN_END[shape]
    tasks = {t.task_id: t for t in read_tasks(out / "tasks.parquet")}
    for row in rows.iter_rows(named=True):
        task = tasks[row["task_id"]]
        prompt = tokenizer.decode(row["prompt_ids"])
        assert prompt == tokenizer.apply_chat_template(
            task.prompt, tools=task.tools, add_generation_prompt=True, tokenize=False
        )
        # the tools reach the model whether the template writes them or gymflow's preamble does
        assert all(t["function"]["name"] in prompt for t in task.tools), prompt[:300]
        completion = row["completion_ids"]
        if tokenizer.eos_token_id in completion:  # a finished turn stops at the turn's end
            assert completion.index(tokenizer.eos_token_id) == len(completion) - 1


@pytest.mark.parametrize("shape", USABLE)
def test_tool_results_encode_as_the_template_writes_them(checkpoints, shape):
    from gymflow.policy.transformers_backend import TransformersPolicy

    policy = TransformersPolicy.from_path(checkpoints[shape])
    task = build_tasks(get_env("counter"), 5, 1, 0.0, 0.0)[0]
    call = render_call("increment", {"by": 2})
    ids = [
        *policy.encode_prompt(task.prompt, task.tools),
        *policy.encode_assistant(call),
        *policy.encode_observation('{"count": 2}'),
    ]
    conversation = [
        *task.prompt,
        {"role": "assistant", "content": call},
        {"role": "tool", "tool_call_id": "c0", "content": '{"count": 2}'},
    ]
    tok = policy.tokenizer
    expected = tok.apply_chat_template(
        conversation, tools=task.tools, add_generation_prompt=True, tokenize=False
    )
    assert tok.decode(ids) == expected
    two = tok.decode(policy.encode_observation("A", last=False) + policy.encode_observation("B"))
    if shape == "qwen3":  # results grouped in one user turn: each result closes its own group
        assert two == (
            "\n<|im_start|>user\n<tool_response>\nA\n</tool_response><|im_end|>"
            "\n<|im_start|>user\n<tool_response>\nB\n</tool_response><|im_end|>"
            "\n<|im_start|>assistant\n"
        )
    else:  # one message per result: exactly the template's text for two results
        end = TURN_END[shape]
        whole = tok.apply_chat_template(
            [*conversation[:2], {"role": "tool", "content": "A"}, {"role": "tool", "content": "B"}],
            tools=task.tools, add_generation_prompt=True, tokenize=False,
        )  # fmt: skip
        assert whole.endswith(two) and whole[: -len(two)].endswith(call + end)


def test_the_embedded_models_tool_results_stay_chatml(micro_tool_call_model):
    from gymflow.policy.transformers_backend import TransformersPolicy

    policy = TransformersPolicy.from_path(micro_tool_call_model)
    assert checkpoint_folder(micro_tool_call_model) == micro_tool_call_model, "used as it is"
    ids = policy.encode_observation("A", last=False) + policy.encode_observation("B")
    assert policy.tokenizer.decode(ids) == (
        "\n<|im_start|>tool\nA<|im_end|>\n<|im_start|>tool\nB<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.parametrize("shape", USABLE)
def test_sft_trains_two_steps_and_keeps_a_usable_checkpoint(checkpoints, tmp_path, shape):
    from gymflow.train.sft import SFTSettings, demonstrations, run_sft

    env = get_env("tool_call")
    start = checkpoint_folder(checkpoints[shape])
    tokenizer = used_tokenizer(checkpoints[shape])
    demos = demonstrations(env, tokenizer, build_tasks(env, 16, 2, 0.0, 0.0))
    assert all(d["completion"].endswith(TURN_END[shape]) for d in demos)
    settings = SFTSettings(max_steps=2, batch_size=4, warmup_steps=0, learning_rate=1e-2)
    result = run_sft(start, tmp_path / "sft", demos, settings, log_to_mlflow=False)
    best = Path(result["path"])
    assert result["steps"] == 2 and moved(start, best) > 0
    # the trained policy carries the template and EOS it was trained with: used as it is
    assert checkpoint_folder(best) == best


class GradedToolCall(ToolCallEnvironment):
    """tool_call, scored by the share of digit characters in the answer: a random policy's
    group rewards then differ, so GRPO's advantage and gradient are not zero."""

    def verify(self, task, items) -> Score:
        text = "".join(str(it.get("content") or it.get("arguments") or "") for it in items[-1:])
        share = sum(c.isdigit() for c in text) / len(text) if text else 0.0
        return Score(share, False, None, {"digits": share}, "graded for tests")


@pytest.mark.parametrize("shape", USABLE)
def test_grpo_trains_two_steps_on_the_checkpoint(checkpoints, tmp_path, shape):
    from gymflow.env.resources_server import build_app
    from gymflow.policy.transformers_backend import TransformersPolicy
    from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo

    env = GradedToolCall()
    start = checkpoint_folder(checkpoints[shape])
    settings = GRPOSettings(
        max_steps=2, prompts_per_step=2, num_generations=4, max_new_tokens=12,
        learning_rate=1e-2, temperature=1.0, save_every=1000, time_budget_s=None,
        dynamic_sampling=False, demo_loss=None, task_sampling="uniform",
    )  # fmt: skip
    rewards: list[float] = []
    pool = build_tasks(env, 32, 3, 0.0, 0.0)
    source = RolloutSource(
        env, build_app(env), pool, settings,
        on_batch=lambda eps, used, step: rewards.extend(e.reward for e in eps),
    )  # fmt: skip
    result = run_grpo(start, tmp_path / "grpo", source, settings, log_to_mlflow=False)
    final = Path(result["path"])
    assert result["steps"] == 2 and len(rewards) == 16
    assert len(set(rewards)) > 1, "graded rewards must vary, or the loss has no gradient"
    assert moved(start, final) > 0
    policy = TransformersPolicy.from_path(final)
    assert policy.tokenizer.eos_token == TURN_END[shape]
    assert policy.generate([policy.encode_prompt(pool[0].prompt, pool[0].tools)], 4, greedy=True)


def test_an_adapted_copy_links_the_weights_and_leaves_the_users_folder_alone(checkpoints):
    source = checkpoints["llama"]
    before = {p.name: p.stat().st_mtime_ns for p in source.iterdir()}
    folder = checkpoint_folder(source)
    assert folder != source and checkpoint_folder(source) == folder, "made once"
    changes = json.loads((folder / ADAPTED_FILE).read_text())["changes"]
    assert set(changes) == {"eos_token", "chat_template"}
    weights = folder / "model.safetensors"
    assert weights.is_symlink() and weights.resolve() == (source / "model.safetensors").resolve()
    assert {p.name: p.stat().st_mtime_ns for p in source.iterdir()} == before
    # Qwen's template writes tools and calls as gymflow reads them: nothing to adapt
    assert checkpoint_folder(checkpoints["qwen3"]) == checkpoints["qwen3"]


REFUSED = {
    "no_template": "the tokenizer has no chat template",
    "json_tools": 'writes a tool call as \'{"name": "gymflow_probe", "parameters"',
}


def one_kinded_line(result) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in result.output, result.output
    assert err.startswith("error: [unusable_checkpoint] ")
    return err


@pytest.mark.parametrize("shape", list(REFUSED))
def test_gymflow_eval_refuses_an_unusable_checkpoint_before_any_work(checkpoints, tmp_path, shape):
    result = gymflow(
        "eval", "--env", "tool_call", "--policy", f"transformers:{checkpoints[shape]}",
        "--split", "val", "--limit", 2, "--out", tmp_path / "x", "--no-mlflow",
    )  # fmt: skip
    err = one_kinded_line(result)
    assert REFUSED[shape] in err and "chat_template" in err, err  # says what to change
    assert not (tmp_path / "x").exists()
    # as the policy compared against: refused before the first policy's episodes run
    result = gymflow(
        "eval", "--env", "tool_call", "--policy", f"transformers:{checkpoints['qwen3']}",
        "--against", f"transformers:{checkpoints[shape]}", "--split", "val", "--limit", 2,
        "--out", tmp_path / "y", "--no-mlflow",
    )  # fmt: skip
    assert REFUSED[shape] in one_kinded_line(result)
    assert not (tmp_path / "y").exists()


@pytest.mark.parametrize("shape", list(REFUSED))
def test_gymflow_run_refuses_an_unusable_model_path_before_any_stage(checkpoints, tmp_path, shape):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_path": str(checkpoints[shape])}))
    result = gymflow("run", "--smoke", "--config", config, "--out", tmp_path / "runs")
    assert REFUSED[shape] in one_kinded_line(result)
    assert not (tmp_path / "runs").exists(), "no run folder, no stage"


def test_a_lifecycle_runs_from_a_user_checkpoint(checkpoints, gym_home, prefect_engine, tmp_path):
    """``model_path`` through every stage: the adapted folder is the start, SFT and GRPO train
    from it, the gate scores it, and the candidate is registered."""
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_config import run_config
    from gymflow.lifecycle.run_context import RunContext
    from gymflow.lifecycle.tracking import parent_run_id

    cfg = run_config(
        None,
        {
            "model_path": str(checkpoints["neox"]), "n_tasks": 300, "demos": 16,
            "profile_samples": 8, "val_eval_n": 8, "heldout_n": 8, "format_threshold": 1.0,
            "sft": {"max_steps": 2, "batch_size": 4, "eval_every": 2, "warmup_steps": 0},
            "grpo": {"max_steps": 2, "prompts_per_step": 2, "num_generations": 2,
                     "max_new_tokens": 8, "save_every": 1000},
            "controls": [],
        },
        smoke=True,
    )  # fmt: skip
    run_id = "user-checkpoint"
    ctx = RunContext(
        run_id=run_id,
        run_dir=str(tmp_path / run_id),
        home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )
    summary = lifecycle(ctx, cfg)
    assert summary["policy_start"] == f"path {checkpoints['neox']}"
    assert summary["sft_ran"] and summary["sft"]["steps"] == 2 and summary["grpo"]["steps"] == 2
    assert summary["registry"]["version"] is not None
    final = tmp_path / run_id / "grpo" / "final"
    assert used_tokenizer(final).chat_template == used_tokenizer(checkpoints["neox"]).chat_template


PLAIN_TEXT_END = "{% for m in messages %}### {{ m.role }}: {{ m.content }}\n\n{% endfor %}"
TEMPLATE_PROBLEMS = {
    "no_eos": ({"eos_token": None}, "the tokenizer has no EOS token"),
    "plain_text_end": ({"chat_template": PLAIN_TEXT_END}, "not with a special token"),
    "fails": (
        {"chat_template": "{{ raise_exception('roles must alternate') }}"},
        "fails on a plain conversation (TemplateError: roles must alternate)",
    ),
    "prompt_not_prefix": (
        {"chat_template": "{% if add_generation_prompt %}A:{% endif %}"
         "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}"},
        "generation prompt is not where it starts the assistant turn",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TEMPLATE_PROBLEMS))
def test_each_template_problem_is_named(case):
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.policy.template_check import inspect_template
    from gymflow.policy.tiny_model import build_tokenizer

    settings, expected = TEMPLATE_PROBLEMS[case]
    tokenizer = build_tokenizer(["hello world 123"] * 20, 300, **settings)
    with pytest.raises(GymflowError) as caught:
        inspect_template(tokenizer, "my-model")
    assert caught.value.kind == FailureKind.UNUSABLE_CHECKPOINT
    assert caught.value.detail.startswith("my-model: ") and expected in caught.value.detail
