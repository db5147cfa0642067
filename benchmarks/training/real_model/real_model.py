"""The real pretrained model's shape: SmolLM2-135M-Instruct, on the CPU or a CUDA GPU.

    python benchmarks/training/real_model/real_model.py [--json] [--out FILE] [--threads N]
        [--device auto|cpu|cuda] [--random-init [--shape-from DIR]] [--gen-batches 32,256]
        [--vllm] [--before-after] [--only gen,vllm,sft,grpo]

Figures a later run can be compared with, all through the product's own paths:

* ``load_first_s``: the GGUF dequantized and saved as a plain folder (``materialize`` into an
  empty cache) plus a policy load; ``load_cached_s``: the same spec loaded again (the folder
  found); ``TransformersPolicy.from_path`` onto ``--device``. With ``--random-init`` there is
  no GGUF: ``load_first_s`` is the first ``from_path`` of the random folder.
* ``generate_tokens_per_s``: 32 tool_call prompts (tools rendered into the system prompt),
  sampled at T=1, 48 new tokens each, one batched call after a warm-up call; new tokens (to
  EOS) / wall seconds. ``--gen-batches`` adds other batch sizes (``generate_b<N>_*``); on CUDA
  the same batches are also timed with the weights cast to bf16 (``*_bf16``), and in bf16 with
  PyTorch's cuDNN attention backend off (``*_bf16_nocudnn``): SDPA picks cuDNN for bf16 on a
  Hopper GPU, and a decode step's key length is new every token.
* ``sft_step_s``: ``run_sft`` on 8 gold demonstrations per step (the ``datasets/smollm2.json``
  preset's batch), fp32, full fine-tuning with the preset's gradient checkpointing (off since
  2026-11-28, so the batch's common prefix runs once; the loss over the 49,152-token
  vocabulary included); median of the steps after a warm-up step (``--steps``, 4 by default:
  3 timed).
* ``grpo_step_s``: ``run_grpo`` on tool_call with B×G = 2×4 rollouts of ≤ 48 tokens (the
  preset's), against the environment in-process, rollouts stored as Parquet, the preset's
  gradient checkpointing (off); median of the steps after a warm-up step.
* ``grpo_rollout_s``: the part of a GRPO step spent in the rollout function (generation and
  the environment), median over the same steps; the rest is TRL's loss pass and the optimizer.
* ``--before-after``: the SFT and GRPO steps in two configurations, same process, same load.
  ``*_before``: what the 2026-11-24 figures (SFT 47.5 s, GRPO 92.2 s) ran: gradient
  checkpointing, and for GRPO every row's prompt in the loss pass (``share_prompts`` off).
  ``*_after``: each group's prompt run once in the loss pass (``share_prompts``, the default
  since 2026-11-26) and no gradient checkpointing (the shared prompt leaves the activations
  of 2 prompts + 8 completions, ~3 GB, where checkpointing was needed for 8 whole rows).
  ``grpo_step_preset_s``: the ``datasets/smollm2.json`` preset as it stands (shared prompts,
  its gradient checkpointing, now off, so it equals ``_after``); with ``--vllm`` also
  ``grpo_step_vllm_s``: the after configuration rolling out on the managed vLLM engine
  (``rollout: {"engine": "vllm"}``, weights synced every step).
* ``--vllm`` (the vLLM environment, ``make setup-vllm``): vLLM's CPU build on the same prompts
  and model folder, fp32, eager, at each ``--gen-batches`` size: ``vllm_bare_*`` is
  ``LLM.generate`` in a process of its own (one request per prompt, seeded; the engine's
  OpenMP threads on every core), ``vllm_served_*`` the product's path
  (:class:`gymflow.policy.vllm_served.VLLMServedPolicy`: ``vllm serve`` over loopback, per-row
  seeds as the rollout driver sends them), and ``vllm_served_share_*`` the second as a share of
  the first.
* ``peak_rss_gb``: the process's peak resident memory; on CUDA also ``gpu_peak_gb`` (the most
  memory torch held on the GPU at once).

On CUDA every clock is read after ``torch.cuda.synchronize()``. SFT and GRPO train on
``--device`` through their ``device`` setting (as a run's ``sft.device`` / ``grpo.device``);
GRPO's rollouts sample from the trainer's model where accelerate put it.

``--random-init``: a model of the real shape (the converted folder's ``config.json``) with random
weights (seed 0) and the real tokenizer and chat template, for a machine the 98 MB GGUF cannot
reach; ``--shape-from DIR`` takes config and tokenizer files from DIR (a converted folder
without its ``model.safetensors``) instead of converting the GGUF. Random weights rarely sample
EOS, so rollouts run to their 48-token limit: the per-token figures compare, the per-step ones
are an upper end for the real model's.

The model is fetched first if it is not in the project's cache (``gymflow models fetch``).
The load average is reported with the figures: on a shared 2-core machine it moves them.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402
from gymflow.core.paths import cache_dir  # noqa: E402
from gymflow.data.task_set import build_tasks  # noqa: E402
from gymflow.env.registry import get_env  # noqa: E402
from gymflow.env.resources_server import build_app  # noqa: E402
from gymflow.policy.device import torch_device  # noqa: E402
from gymflow.policy.gguf_checkpoint import materialize  # noqa: E402
from gymflow.policy.model_catalog import fetch  # noqa: E402
from gymflow.policy.transformers_backend import TransformersPolicy  # noqa: E402
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo  # noqa: E402
from gymflow.train.sft import SFTSettings, demonstrations, run_sft  # noqa: E402

NAME = "smollm2-135m-instruct"
MAX_NEW_TOKENS = 48
STEPS = 4
PRESET = json.loads((Path(__file__).resolve().parents[3] / "datasets" / "smollm2.json").read_text())
"""The ``datasets/smollm2.json`` preset: its gradient-checkpointing settings are the defaults."""
"""Optimizer steps per timed run: a warm-up, then the median of the rest (``--steps``)."""
GGUF = "the catalog's GGUF (Q4_1), dequantized to float32"


def sync(device) -> None:
    """Wait for the GPU's queued work, so that a host clock read next times it."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def step_timer(device):
    """A ``TrainerCallback`` recording each optimizer step's wall time (GPU work included)."""
    from transformers import TrainerCallback

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.start = 0.0

        def on_step_begin(self, args, state, control, **kw):
            sync(device)
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync(device)
            self.times.append(time.perf_counter() - self.start)

    return Timer()


def random_folder(shape: Path, out: Path) -> Path:
    """A ``from_pretrained`` folder: ``shape``'s config, tokenizer and template, random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True)
    for f in shape.iterdir():
        if f.is_file() and not f.name.endswith((".safetensors", ".bin")):
            shutil.copy2(f, out / f.name)
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(shape)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(out)
    return out


def load_times(source: Path, scratch: Path, device: str, random_init: bool) -> tuple[dict, Path]:
    """Seconds to the first and a second ``from_path`` (the first converting a GGUF)."""
    started = time.perf_counter()
    folder = source if random_init else materialize(source, scratch / "cache")
    policy = TransformersPolicy.from_path(folder, device=device)
    sync(policy.model.device)
    first = time.perf_counter() - started
    del policy
    started = time.perf_counter()
    again = folder if random_init else materialize(source, scratch / "cache")
    policy = TransformersPolicy.from_path(again, device=device)
    sync(policy.model.device)
    cached = time.perf_counter() - started
    return {"load_first_s": round(first, 2), "load_cached_s": round(cached, 2)}, folder


def timed_generation(policy, prompts, suffix: str) -> dict:
    """One batched sampled call over ``prompts`` after a short warm-up call."""
    policy.batch_size = len(prompts)
    policy.generate(prompts[:4], max_new_tokens=8, greedy=False, seed=0)
    sync(policy.model.device)
    started = time.perf_counter()
    outs = policy.generate(prompts, max_new_tokens=MAX_NEW_TOKENS, greedy=False, seed=1)
    sync(policy.model.device)
    wall = time.perf_counter() - started
    new_tokens = sum(len(o.token_ids) for o in outs)
    return {
        f"generate{suffix}_s": round(wall, 3),
        f"generate{suffix}_new_tokens_mean": round(new_tokens / len(prompts), 1),
        f"generate{suffix}_tokens_per_s": round(new_tokens / wall, 1),
    }


def generation(folder: Path, tasks, device: str, batches: list[int]) -> dict:
    import torch

    policy = TransformersPolicy.from_path(folder, device=device)
    prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks]
    result = {
        "parameters_m": round(sum(p.numel() for p in policy.model.parameters()) / 1e6, 1),
        "generate_batch": batches[0],
        "prompt_tokens_mean": round(statistics.mean(len(p) for p in prompts[: batches[0]]), 1),
    }
    variants = [("", torch.float32, True)]
    if policy.model.device.type == "cuda":
        variants += [("_bf16", torch.bfloat16, True), ("_bf16_nocudnn", torch.bfloat16, False)]
    cudnn_sdp = torch.backends.cuda.cudnn_sdp_enabled()
    for tag, dtype, cudnn in variants:
        policy.model.to(dtype)
        torch.backends.cuda.enable_cudnn_sdp(cudnn_sdp and cudnn)
        for n in batches:
            suffix = ("" if n == batches[0] else f"_b{n}") + tag
            rows = [prompts[i % len(prompts)] for i in range(n)]
            result.update(timed_generation(policy, rows, suffix))
    torch.backends.cuda.enable_cudnn_sdp(cudnn_sdp)
    return result


def sft_step(
    folder: Path, env, tasks, out: Path, device, suffix="",
    checkpointing=PRESET["sft"]["gradient_checkpointing"],
) -> dict:  # fmt: skip
    from transformers import AutoTokenizer

    demos = demonstrations(env, AutoTokenizer.from_pretrained(folder), tasks[:48])
    settings = SFTSettings(
        max_steps=STEPS,
        batch_size=8,
        eval_every=10**6,
        warmup_steps=0,
        gradient_checkpointing=checkpointing,
        device=device.type,
        **({"time_budget_s": None} if "time_budget_s" in SFTSettings.model_fields else {}),
    )
    timer = step_timer(device)
    run_sft(folder, out, demos, settings, log_to_mlflow=False, callbacks=[timer])
    return {"sft_batch": 8, f"sft_step{suffix}_s": round(statistics.median(timer.times[1:]), 3)}


def grpo_step(
    folder: Path, env, tasks, out: Path, device, suffix="",
    checkpointing=PRESET["grpo"]["gradient_checkpointing"], share=True, engine="local",
) -> dict:  # fmt: skip
    settings = GRPOSettings(
        max_steps=STEPS, prompts_per_step=2, num_generations=4, max_new_tokens=MAX_NEW_TOKENS,
        dynamic_sampling=False, save_every=10**6, time_budget_s=None, seed=0,
        gradient_checkpointing=checkpointing, share_prompts=share, device=device.type,
        demo_loss=None, task_sampling="uniform", rollout={"engine": engine},
    )  # fmt: skip
    from transformers import TrainerCallback

    timer = step_timer(device)
    source = RolloutSource(env, build_app(env), tasks, settings, out_dir=out)
    rollout_s: list[float] = []

    class Rollouts(TrainerCallback):  # the rollout function's share of each step
        def on_step_end(self, args, state, control, **kw):
            rollout_s.append(source.stats["rollout_s"] - sum(rollout_s))

    run_grpo(
        folder, out, source, settings, log_to_mlflow=False, resume=False,
        callbacks=[timer, Rollouts()],
    )  # fmt: skip
    return {
        "grpo_rollouts_per_step": settings.prompts_per_step * settings.num_generations,
        f"grpo_step{suffix}_s": round(statistics.median(timer.times[1:]), 3),
        f"grpo_rollout{suffix}_s": round(statistics.median(rollout_s[1:]), 3),
    }


def before_after(folder: Path, env, tasks, scratch: Path, device, parts: set[str]) -> dict:
    """SFT and GRPO steps as measured on 2026-11-24 (before) and as configured now (after)."""
    result = {}
    if "sft" in parts:
        result.update(sft_step(folder, env, tasks, scratch / "sft-b", device, "_before", True))
        result.update(sft_step(folder, env, tasks, scratch / "sft-a", device, "_after", False))
    if "grpo" in parts:
        preset = PRESET["grpo"]["gradient_checkpointing"]
        grpo = [("_before", True, False), ("_preset", preset, True), ("_after", False, True)]
        for suffix, checkpointing, share in grpo:
            out = scratch / f"grpo{suffix}"
            result.update(grpo_step(folder, env, tasks, out, device, suffix, checkpointing, share))
    if "vllm" in parts:  # the after configuration, rolling out on the managed vLLM engine
        out = scratch / "grpo-vllm"
        result.update(grpo_step(folder, env, tasks, out, device, "_vllm", False, True, "vllm"))
    for stage in [s for s in ("sft", "grpo") if f"{s}_step_before_s" in result]:
        before, after = result[f"{stage}_step_before_s"], result[f"{stage}_step_after_s"]
        result[f"{stage}_speedup"] = round(before / after, 2)
    return result


BARE_VLLM = """
import json, os, sys, time
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
from vllm import LLM, SamplingParams
job = json.load(open(sys.argv[1]))
started = time.perf_counter()
llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, seed=0,
          kv_cache_memory_bytes=2 << 30, max_model_len=2048, enable_chunked_prefill=False,
          max_num_batched_tokens=8192)
out = {"vllm_load_s": round(time.perf_counter() - started, 2)}
for n, prompts in job["batches"].items():
    params = [SamplingParams(max_tokens=job["max_tokens"], temperature=1.0, top_k=0, top_p=1.0,
                             logprobs=0, seed=1 + i) for i in range(len(prompts))]
    rows = [{"prompt_token_ids": p} for p in prompts]
    llm.generate(rows[:4], params[:4], use_tqdm=False)  # warm-up
    started = time.perf_counter()
    done = llm.generate(rows, params, use_tqdm=False)
    wall = time.perf_counter() - started
    tokens = sum(len(d.outputs[0].token_ids) for d in done)
    out[f"vllm_bare_b{n}_tokens_per_s"] = round(tokens / wall, 1)
print("RESULT " + json.dumps(out))
"""


def vllm_generation(folder: Path, prompts: list[list[int]], batches: list[int], scratch: Path):
    """vLLM's CPU build: bare ``LLM.generate`` and the product's served path, same prompts."""
    import json
    import subprocess

    from gymflow.policy.vllm_engine import engine_environment, vllm_python
    from gymflow.policy.vllm_served import VLLMServedPolicy

    python = vllm_python()
    rows = {str(n): [prompts[i % len(prompts)] for i in range(n)] for n in batches}
    (scratch / "bare.py").write_text(BARE_VLLM)
    (scratch / "bare.json").write_text(
        json.dumps({"model": str(folder), "batches": rows, "max_tokens": MAX_NEW_TOKENS})
    )
    env = engine_environment()  # the product's engine settings: threads on every core
    done = subprocess.run(
        [str(python), str(scratch / "bare.py"), str(scratch / "bare.json")],
        env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        raise RuntimeError(f"bare vLLM failed: {done.stderr[-2000:]}")
    result = json.loads(line[0][7:])
    started = time.perf_counter()
    served = VLLMServedPolicy.start(folder)
    result["vllm_served_start_s"] = round(time.perf_counter() - started, 2)
    try:
        for n, batch in rows.items():
            served.generate(batch[:4], 8, seed=[0, 1, 2, 3])  # warm-up
            started = time.perf_counter()
            outs = served.generate(batch, MAX_NEW_TOKENS, seed=list(range(1, len(batch) + 1)))
            wall = time.perf_counter() - started
            rate = sum(len(o.token_ids) for o in outs) / wall
            result[f"vllm_served_b{n}_tokens_per_s"] = round(rate, 1)
            share = rate / result[f"vllm_bare_b{n}_tokens_per_s"]
            result[f"vllm_served_share_b{n}"] = round(share, 3)
    finally:
        served.close()
    return result


def where(device, threads: int) -> dict:
    """The machine, the accelerator and the library versions the figures belong to."""
    import torch
    import transformers
    import trl

    found = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {threads} torch threads",
        "device": str(device),
        "dtype": "float32 (generation also bfloat16 on CUDA)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }
    if device.type == "cuda":
        found["gpu"] = torch.cuda.get_device_name(device)
        found["cuda"] = torch.version.cuda
    return found


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    parser.add_argument("--random-init", action="store_true", help="random weights, real shape")
    parser.add_argument("--shape-from", type=Path, help="config + tokenizer folder (random-init)")
    parser.add_argument("--gen-batches", default="32", help="generation batch sizes, e.g. 32,256")
    parser.add_argument(
        "--vllm", action="store_true", help="also vLLM's CPU build (make setup-vllm)"
    )
    parser.add_argument("--before-after", action="store_true", help="SFT/GRPO before and after")
    parser.add_argument("--only", default="gen,sft,grpo", help="parts: gen,vllm,sft,grpo")
    parser.add_argument("--steps", type=int, default=4, help="steps per timed run (>= 2)")
    args = parser.parse_args()
    global STEPS
    STEPS = max(2, args.steps)
    parts = set(args.only.split(",")) | ({"vllm"} if args.vllm else set())
    import torch

    torch.set_num_threads(args.threads)
    device = torch_device(args.device)
    batches = [int(n) for n in args.gen_batches.split(",")]
    env = get_env("tool_call")
    tasks = build_tasks(env, max(200, *batches), seed=1, heldout_frac=0.0, val_frac=0.0)
    result = {
        "benchmark": "real_model",
        "model": NAME,
        "weights": "random-init (seed 0), real shape and tokenizer" if args.random_init else GGUF,
        "date": datetime.date.today().isoformat(),
        **where(device, args.threads),
        "load_avg_start": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        if args.random_init:
            shape = args.shape_from or materialize(fetch(NAME, cache_dir()), scratch / "cache")
            source = random_folder(shape, scratch / "random")
        else:
            source = fetch(NAME, cache_dir())
        loads, folder = load_times(source, scratch, str(device), args.random_init)
        result.update(loads)
        if "gen" in parts:
            result.update(generation(folder, tasks, str(device), batches))
        if "vllm" in parts and not args.before_after:
            policy = TransformersPolicy.from_path(folder, device="cpu")
            prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks]
            del policy
            result.update(vllm_generation(folder, prompts, batches, scratch))
        if args.before_after:
            result.update(before_after(folder, env, tasks, scratch, device, parts))
        else:
            if "sft" in parts:
                result.update(sft_step(folder, env, tasks, scratch / "sft", device))
            if "grpo" in parts:
                result.update(grpo_step(folder, env, tasks, scratch / "grpo", device))
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    if device.type == "cuda":
        result["gpu_peak_gb"] = round(torch.cuda.max_memory_allocated(device) / 1e9, 2)
    result["load_avg_end"] = round(os.getloadavg()[0], 2)
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
