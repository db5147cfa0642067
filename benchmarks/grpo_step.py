"""GRPO step time: our ``rollout_func`` against TRL's own paths, side by side in one process.

    python benchmarks/grpo_step.py [--json] [--out FILE] [--steps N] [--cache DIR]

Same model (the embedded tiny model after a short SFT on whole gold ``counter`` episodes, see
:mod:`benchmarks.grpo_envs`), same machine, same ``GRPOConfig`` (``gymflow.grpo.trainer_config``),
B×G = 4×8 = 32 rollouts per step, one warm-up step then the median of ``--steps`` steps, timed
from ``on_step_begin`` to ``on_step_end`` (generation, tools, rewards, loss, optimizer):

(a) slow tools — ``counter`` (up to 4 turns: two increments, a read, the answer) with every tool
    call taking 50 ms of waiting (a remote call):
    * ``step_s_ours``: ``run_grpo`` with :class:`gymflow.grpo.RolloutSource`: the 32 episodes run
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.grpo_envs import (  # noqa: E402
    SFT_STEPS,
    CounterToolEnv,
    OneTurnCounter,
    SlowTools,
    counter_policy,
    counter_reward,
)
from benchmarks.report import arguments, emit  # noqa: E402
from environments.counter.server import CounterServer  # noqa: E402
from gymflow.grpo import GRPOSettings, RolloutSource, run_grpo, trainer_config  # noqa: E402
from gymflow.home import project_home  # noqa: E402
from gymflow.resources_server import build_app  # noqa: E402
from gymflow.task_set import build_tasks  # noqa: E402

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
                self._t = self._c = 0.0

            def on_step_begin(self, args, state, control, **kw):
                self._t, self._c = time.perf_counter(), time.process_time()

            def on_step_end(self, args, state, control, **kw):
                self.times.append(time.perf_counter() - self._t)
                self.cpu.append(time.process_time() - self._c)

        return _Timer()


def _median_after_warmup(times: list[float]) -> float:
    return round(statistics.median(times[1:]), 3)


def _timings(timer, rollout_times: list[float]) -> dict:
    return {
        "step_s": _median_after_warmup(timer.times),
        "step_cpu_s": _median_after_warmup(timer.cpu),
        "rollout_s": _median_after_warmup(rollout_times),
    }


class TimedSource(RolloutSource):
    """Our ``rollout_func``, timing each call (the rollout phase of a step)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
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
        time_budget_s=None, seed=0,
    )  # fmt: skip


def ours(policy: Path, env, app, tasks, gs: GRPOSettings, out: Path) -> dict:
    timer = StepTimer()
    calls, rollouts = [0], [0]

    def count(episodes, used, step):
        calls[0] += sum(e.tool_calls for e in episodes)
        rollouts[0] += len(episodes)

    source = TimedSource(env, app, tasks, gs, count)
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
    config.max_tool_calling_iterations = CounterServer.max_turns - 1
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


def run(steps: int, cache: Path) -> dict:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    import torch

    # One thread: this model is too small to gain from two, and on a shared machine OpenMP's
    # barrier between two threads turns every tiny matmul into a wait for a descheduled thread.
    torch.set_num_threads(1)
    t0 = time.time()
    policy = counter_policy(cache)
    prep_s = time.time() - t0
    gs = settings(steps)
    multi, single = CounterServer(), OneTurnCounter()
    tasks = build_tasks(multi, 400, seed=21, heldout_frac=0.0, val_frac=0.0)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        slow = ours(policy, multi, SlowTools(build_app(multi), DELAY_S), tasks, gs, out / "a")
        trl_env = environment_factory(policy, tasks, gs, out / "b")
        instant = ours(policy, single, build_app(single), tasks, gs, out / "c")
        bare = bare_trl(policy, tasks, gs, out / "d")
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
            "statistic": "median step wall time",
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
        "model_prep_s": round(prep_s, 1),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=3, help="measured steps per path")
    parser.add_argument(
        "--cache",
        type=Path,
        default=project_home() / ".cache",
        help="where the tiny model and its SFT are cached",
    )
    args = parser.parse_args()
    from gymflow.home import quiet_libraries

    quiet_libraries()
    result = run(args.steps, args.cache)
    emit(result, args.out)


if __name__ == "__main__":
    main()
