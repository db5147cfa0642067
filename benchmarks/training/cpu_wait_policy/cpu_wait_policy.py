"""How PyTorch's CPU threads wait: spinning (OpenMP's default) against passive (gymflow's).

    python benchmarks/training/cpu_wait_policy/cpu_wait_policy.py [--repeats 3] [--json] [--out FILE]

Each of torch's intra-op threads waits for the others at the end of every parallel op. OpenMP's
default lets a waiting thread spin for a while; on a machine with other work on its cores — the
SFT control beside GRPO, a Prefect or MLflow server, a test's servers, another user's job — a
spinning thread holds the core the thread it waits for needs, and an op that takes microseconds
can take a scheduler time slice. ``OMP_WAIT_POLICY=PASSIVE`` makes it sleep instead; this
measures what that costs on a quiet machine and saves on a busy one. (gymflow leaves OpenMP's
default: the lifecycle's quiet stages sample and train faster spinning, and GRPO and its
control each run one thread, which never waits for another; docs/how-to/troubleshoot.md tells
a shared machine's user to set it.)

The work, in a fresh interpreter per setting (the policy is read when torch loads): the embedded
default's model shape (192 wide, 4 layers) sampling 32 prompts × 32 tokens, and 10 SFT-sized
forward + backward passes (32 × 128 tokens), at torch's default thread count. Busy: the same
with a second process running the same work alongside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.common import arguments, emit  # noqa: E402

WORK = """
import json, time, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=800, hidden_size=192, intermediate_size=576, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512)
model = LlamaForCausalLM(cfg)
ids = torch.randint(0, 800, (32, 96))
def sample():
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        past, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(32):
            out = model(input_ids=tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
def train():
    batch = torch.randint(0, 800, (32, 128))
    for _ in range(10):
        model(input_ids=batch, labels=batch).loss.backward()
sample(); train()  # warm-up
t = time.perf_counter(); sample(); gen = time.perf_counter() - t
t = time.perf_counter(); train(); fit = time.perf_counter() - t
print(json.dumps({"sample_s": round(gen, 3), "train_s": round(fit, 3),
                  "threads": torch.get_num_threads()}))
"""


def run_once(policy: str | None, busy: bool) -> dict:
    """One measurement in a fresh interpreter; with ``busy``, a second copy runs alongside."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    rival = None
    if busy:
        rival = subprocess.Popen([sys.executable, "-c", f"while True:\n    exec({WORK!r})"], env=env, stdout=subprocess.DEVNULL)  # fmt: skip
        time.sleep(5)  # its model built and working
    try:
        done = subprocess.run([sys.executable, "-c", WORK], env=env, capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        if rival is not None:
            rival.kill()
            rival.wait()
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="best of N per setting")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.repeats = 1
    results = {}
    for busy in (False, True):
        for policy in (None, "PASSIVE"):
            runs = [run_once(policy, busy) for _ in range(args.repeats)]
            key = f"{'busy' if busy else 'quiet'}/{policy or 'default (spin)'}"
            results[key] = {
                "sample_s": min(r["sample_s"] for r in runs),
                "train_s": min(r["train_s"] for r in runs),
                "threads": runs[0]["threads"],
            }
            print(key, results[key], file=sys.stderr, flush=True)
    emit(
        {
            "benchmark": "cpu_wait_policy",
            "command": " ".join(
                ["python benchmarks/training/cpu_wait_policy/cpu_wait_policy.py", *sys.argv[1:]]
            ),
            "date": time.strftime("%Y-%m-%d"),
            "best_of": args.repeats,
            "results": results,
        },
        args.out,
        compact=args.json,
    )


if __name__ == "__main__":
    main()
