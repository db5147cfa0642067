"""GRPO step time: our ``rollout_func`` against TRL's own paths, side by side in one process.

    python benchmarks/training/grpo_step/grpo_step.py [--json] [--out FILE] [--steps N] [--repeats R] [--cache DIR]

Same model (the embedded tiny model after a short SFT on whole gold ``counter`` episodes, see
:mod:`benchmarks.grpo_envs`), same machine, same ``GRPOConfig`` (``gymflow.train.grpo.trainer_config``),
B×G = 4×8 = 32 rollouts per step, timed from ``on_step_begin`` to ``on_step_end`` (generation,
tools, rewards, loss, optimizer). Each path trains ``--repeats`` times from the same start, the
paths alternating; a run's first step is warm-up, and the figure is the median over the
measured steps of all its runs:

(a) slow tools — ``counter`` (up to 4 turns: two increments, a read, the answer) with every tool
    call taking 50 ms of waiting (a remote call):
    * ``step_s_ours``: ``run_grpo`` with :class:`gymflow.train.grpo.RolloutSource`: the 32 episodes run
      concurrently against the resources server, each turn one batched generation, the tool
      calls of all episodes overlapped;
    * ``step_s_environment_factory``: TRL's ``environment_factory`` with the same counter logic
      and the same 50 ms per call (async tools, TRL's fastest variant); TRL batches generation
      per turn but calls the tools one rollout after another.
    Both paths do the same tool work because the model was SFT'd to make the calls: the
    measured calls per rollout of each are in the output (``tool_calls_per_rollout_*``).
    Dynamic sampling is off in ours so that both roll out exactly 32 episodes per step.
(b) instant environment — ``counter`` cut to one turn, no delay: ``step_s_ours_instant``
    (``run_grpo``) against ``step_s_bare_trl``: ``GRPOTrainer`` generating itself with a plain
    reward function, on the same prompt tokens (the rendered prompt as a string prompt).

Also reported: ``rollout_s_*`` (the generation phase alone: TRL's ``_generate`` / our
``rollout_func``), ``step_cpu_s_*`` (process CPU time, steadier than wall time on a shared
machine) and the tool calls each path made per rollout.

What bounds the speedup: TRL's sequential tool calls cost ~32 × 3 × 50 ms ≈ 4.7 s per step,
ours ≈ 3 turns × 50 ms; everything else (generation and the update, ~1.5 s per step on one CPU
thread for this model) is the same work in both, so on CPU the step ratio stays near
(1.5 + 4.7) / (1.5 + 0.15). The more of a step the environment takes, the closer to the
ratio of the tool phases it gets.

Prints one JSON object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402
from benchmarks.training.grpo_step.grpo_envs import (  # noqa: E402
    SFT_STEPS,
    CounterToolEnv,
    OneTurnCounter,
    SlowTools,
    counter_policy,
    counter_reward,
)
from gymflow.data.task_set import build_tasks  # noqa: E402
from gymflow.env.resources_server import build_app  # noqa: E402
from gymflow.environments.counter.environment import CounterEnvironment  # noqa: E402
from gymflow.lifecycle.home import project_home  # noqa: E402
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo, trainer_config  # noqa: E402

DELAY_S = 0.05
MAX_COMPLETION = 256  # the whole multi-turn completion (model + tool tokens), as in Sampling


class StepTimer:
    """A ``TrainerCallback`` that records each optimizer step's wall time."""

    def __new__(cls):
        from transformers import TrainerCallback

        class _Timer(TrainerCallback):
            def __init__(self) -> None:
                self.times: list[float] = []
                self.cpu: list[float] = []
                self.lengths: list[float] = []  # TRL's mean completion length per step
                self._t = self._c = 0.0

            def on_step_begin(self, args, state, control, **kw):
                self._t, self._c = time.perf_counter(), time.process_time()

            def on_step_end(self, args, state, control, **kw):
                self.times.append(time.perf_counter() - self._t)
                self.cpu.append(time.process_time() - self._c)

            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "completions/mean_length" in logs:
                    self.lengths.append(logs["completions/mean_length"])

        return _Timer()


def _timings(timer, rollout_times: list[float]) -> dict:
    """One training run's per-step samples, its warm-up step left out."""
    return {
        "step_s": timer.times[1:],
        "step_cpu_s": timer.cpu[1:],
        "rollout_s": rollout_times[1:],
        "completion_tokens": timer.lengths[1:],
    }


def _pooled(runs: list[dict]) -> dict:
    """Medians over the steps of every repeat of one path (mean completion tokens, and the
    mean of per-run figures such as tool calls per rollout)."""
    out = {}
    for key in runs[0]:
        values = [v for run in runs for v in (run[key] if isinstance(run[key], list) else [])]
        if key == "completion_tokens":
            out[key] = round(statistics.mean(values), 1)
        elif values:
            out[key] = round(statistics.median(values), 3)
        else:
            out[key] = round(statistics.mean(run[key] for run in runs), 2)
    return out


class TimedSource(RolloutSource):
    """Our ``rollout_func``, timing each call (the rollout phase of a step)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.times: list[float] = []

    def __call__(self, prompts, trainer) -> dict:
        started = time.perf_counter()
        out = super().__call__(prompts, trainer)
        self.times.append(time.perf_counter() - started)
        return out


def _timed_trainer(**kwargs):
    """TRL's ``GRPOTrainer`` timing its own generation phase (``_generate``: turns + tools)."""
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    class Timed(GRPOTrainer):
        rollout_times: list[float] = []

        def _generate(self, *args, **kw):
            started = time.perf_counter()
            out = super()._generate(*args, **kw)
            self.rollout_times.append(time.perf_counter() - started)
            return out

    trainer = Timed(**kwargs)
    trainer.rollout_times = []
    trainer.remove_callback(PrinterCallback)  # stdout stays one JSON object
    return trainer


def settings(steps: int) -> GRPOSettings:
    return GRPOSettings(
        max_steps=steps + 1, prompts_per_step=4, num_generations=8, learning_rate=1e-4,
        temperature=0.7, max_new_tokens=48, dynamic_sampling=False, save_every=10**6,
        time_budget_s=None, seed=0, demo_loss=None, task_sampling="uniform",
    )  # fmt: skip


def ours(policy: Path, env, app, tasks, gs: GRPOSettings, out: Path) -> dict:
    timer = StepTimer()
    calls, rollouts = [0], [0]

    def count(episodes, used, step):
        calls[0] += sum(e.tool_calls for e in episodes)
        rollouts[0] += len(episodes)

    # rows stored as the lifecycle stores them (validated Parquet parts): part of a real step
    source = TimedSource(env, app, tasks, gs, out_dir=out, on_batch=count)
    run_grpo(policy, out, source, gs, log_to_mlflow=False, resume=False, callbacks=[timer])
    return {
        **_timings(timer, source.times),
        "tool_calls_per_rollout": round(calls[0] / rollouts[0], 2),
    }


def environment_factory(policy: Path, tasks, gs: GRPOSettings, out: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen3_template

    from datasets import Dataset

    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    # Our template's calls are Qwen's (<tool_call>{json}</tool_call> in ChatML turns), so TRL's
    # Qwen3 response parser reads them; TRL has no parser for a template it does not know.
    tokenizer.response_template = qwen3_template
    rows = [
        {"prompt": t.prompt, **{k: t.ground_truth[k] for k in ("initial_count", "expected_count")}}
        for t in tasks
    ]
    config = trainer_config(gs, out / "trainer", log_to_mlflow=False)
    config.max_completion_length = MAX_COMPLETION
    config.max_tool_calling_iterations = CounterEnvironment.max_turns - 1
    timer = StepTimer()
    CounterToolEnv.calls = 0
    trainer = _timed_trainer(
        model=AutoModelForCausalLM.from_pretrained(policy),
        reward_funcs=[counter_reward],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=CounterToolEnv,
        callbacks=[timer],
    )
    trainer.train()
    rollouts = gs.max_steps * gs.prompts_per_step * gs.num_generations
    return {
        **_timings(timer, trainer.rollout_times),
        "tool_calls_per_rollout": round(CounterToolEnv.calls / rollouts, 2),
    }


def bare_trl(policy: Path, tasks, gs: GRPOSettings, out: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from datasets import Dataset

    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    rows = [
        {
            "prompt": tokenizer.apply_chat_template(
                t.prompt, tools=t.tools, add_generation_prompt=True, tokenize=False
            ),
            "answer": str(t.ground_truth["expected_count"]),
        }
        for t in tasks
    ]

    def exact_answer(completions, answer, **kw) -> list[float]:
        return [float(c.strip() == a) for c, a in zip(completions, answer, strict=True)]

    timer = StepTimer()
    trainer = _timed_trainer(
        model=AutoModelForCausalLM.from_pretrained(policy),
        reward_funcs=[exact_answer],
        args=trainer_config(gs, out / "trainer", log_to_mlflow=False),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.train()
    return _timings(timer, trainer.rollout_times)


def run(steps: int, cache: Path, repeats: int = 3) -> dict:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    import torch

    # One thread: this model is too small to gain from two, and on a shared machine OpenMP's
    # barrier between two threads turns every tiny matmul into a wait for a descheduled thread.
    torch.set_num_threads(1)
    t0 = time.time()
    policy = counter_policy(cache)
    prep_s = time.time() - t0
    gs = settings(steps)
    multi, single = CounterEnvironment(), OneTurnCounter()
    tasks = build_tasks(multi, 400, seed=21, heldout_frac=0.0, val_frac=0.0)
    runs: dict[str, list[dict]] = {"slow": [], "trl_env": [], "instant": [], "bare": []}
    # The paths alternate (a b c d a b c d …) so that a noisy stretch of a shared machine lands
    # on every path rather than on one: single sequential runs moved the instant ratio by ±35 %.
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            slow_app = SlowTools(build_app(multi), DELAY_S)
            runs["slow"].append(ours(policy, multi, slow_app, tasks, gs, out / "a"))
            runs["trl_env"].append(environment_factory(policy, tasks, gs, out / "b"))
            runs["instant"].append(ours(policy, single, build_app(single), tasks, gs, out / "c"))
            runs["bare"].append(bare_trl(policy, tasks, gs, out / "d"))
    slow, trl_env, instant, bare = (
        _pooled(runs[k]) for k in ("slow", "trl_env", "instant", "bare")
    )
    return {
        "benchmark": "grpo_step",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "settings": {
            "model": f"embedded tiny model ({policy.parent.name}), SFT {SFT_STEPS} steps "
            "on whole gold counter episodes",
            "prompts_per_step": gs.prompts_per_step,
            "num_generations": gs.num_generations,
            "temperature": gs.temperature,
            "max_new_tokens_per_turn": gs.max_new_tokens,
            "tool_delay_s": DELAY_S,
            "measured_steps": steps,
            "warmup_steps": 1,
            "repeats": repeats,
            "statistic": "median step wall time over every repeat's measured steps",
            "dynamic_sampling": gs.dynamic_sampling,
            "device": "cpu",
        },
        "step_s_ours": slow["step_s"],
        "step_s_environment_factory": trl_env["step_s"],
        "speedup_vs_environment_factory": round(trl_env["step_s"] / slow["step_s"], 2),
        "rollout_s_ours": slow["rollout_s"],
        "rollout_s_environment_factory": trl_env["rollout_s"],
        "rollout_speedup_vs_environment_factory": round(
            trl_env["rollout_s"] / slow["rollout_s"], 2
        ),
        "step_cpu_s_ours": slow["step_cpu_s"],
        "step_cpu_s_environment_factory": trl_env["step_cpu_s"],
        "tool_calls_per_rollout_ours": slow["tool_calls_per_rollout"],
        "tool_calls_per_rollout_environment_factory": trl_env["tool_calls_per_rollout"],
        "step_s_ours_instant": instant["step_s"],
        "step_s_bare_trl": bare["step_s"],
        "ratio_vs_bare_trl": round(instant["step_s"] / bare["step_s"], 3),
        "step_cpu_s_ours_instant": instant["step_cpu_s"],
        "step_cpu_s_bare_trl": bare["step_cpu_s"],
        "cpu_ratio_vs_bare_trl": round(instant["step_cpu_s"] / bare["step_cpu_s"], 3),
        "rollout_s_ours_instant": instant["rollout_s"],
        "rollout_s_bare_trl": bare["rollout_s"],
        "completion_tokens_ours": slow["completion_tokens"],
        "completion_tokens_environment_factory": trl_env["completion_tokens"],
        "completion_tokens_ours_instant": instant["completion_tokens"],
        "completion_tokens_bare_trl": bare["completion_tokens"],
        "model_prep_s": round(prep_s, 1),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=4, help="measured steps per path and repeat")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each path, alternating between paths"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=project_home() / ".cache",
        help="where the tiny model and its SFT are cached",
    )
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.steps, args.repeats = 1, 1
    from gymflow.lifecycle.home import quiet_libraries

    quiet_libraries()
    result = run(args.steps, args.cache, args.repeats)
    emit(result, args.out)


if __name__ == "__main__":
    main()
