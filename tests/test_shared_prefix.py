"""Running a batch's common prefix once gives TRL's own SFT loss, metrics and gradients.

Real parts: TRL's ``SFTTrainer`` (its collator, fused LM head and ``compute_loss``) on a tiny
transformers Llama, against the same trainer class with
:func:`gymflow.train.shared_prefix.with_shared_prefix`, on the first batch TRL's own data
loader makes of the counter environment's gold demonstrations (rendered as the SFT stage
renders them: every prompt starts with the same system turn and tool schema, prompts and
completions of different lengths, right-padded). GRPO's demo loss is checked the same way,
and two SFT runs, with the setting on and off, train the same start to the same weights.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from datasets import Dataset
from gymflow.data.task_set import build_tasks
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.train.demo_loss import DemoLoss, DemoLossSettings
from gymflow.train.sft import SFTSettings, demonstrations, run_sft
from gymflow.train.shared_prefix import MIN_PREFIX, prefix_cut, prefix_once, with_shared_prefix


def _demos(model_dir, n: int = 16) -> list[dict]:
    env = CounterEnvironment()
    tasks = build_tasks(env, n, seed=4, heldout_frac=0.0, val_frac=0.0)
    return demonstrations(env, AutoTokenizer.from_pretrained(model_dir), tasks)


def _trainer(cls, model_dir, demos, tmp_path):
    args = SFTConfig(
        output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=len(demos),
        report_to="none", bf16=False, max_length=384, seed=0,
    )  # fmt: skip
    return cls(
        model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
        train_dataset=Dataset.from_list(demos),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )  # fmt: skip


def _loss_metrics_grads(trainer, batch):
    model = trainer.model
    model.train()
    model.zero_grad()
    loss = trainer.compute_loss(model, dict(batch))
    loss.backward()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(loss), metrics, grads


def test_sft_loss_with_the_prefix_once_matches_trls(counter_model, tmp_path):
    demos = _demos(counter_model)
    plain = _trainer(SFTTrainer, counter_model, demos, tmp_path / "plain")
    shared = _trainer(with_shared_prefix(SFTTrainer), counter_model, demos, tmp_path / "shared")
    batch = next(iter(plain.get_train_dataloader()))
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    # the batch is what the setting is for: rows of different lengths behind a common prefix
    assert prefix_cut(ids, mask, labels) >= MIN_PREFIX and len(set(mask.sum(1).tolist())) > 1
    assert prefix_once(shared.model, ids, mask, labels) is not None  # it runs, not steps aside
    want = _loss_metrics_grads(plain, batch)
    got = _loss_metrics_grads(shared, batch)
    assert abs(got[0] - want[0]) < 1e-5
    for name in ("entropy", "mean_token_accuracy", "num_tokens"):
        assert abs(got[1][name] - want[1][name]) < 1e-4, name
    assert want[2].keys() == got[2].keys() and len(want[2]) > 0
    for name, grad in want[2].items():
        torch.testing.assert_close(got[2][name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_demo_loss_with_the_prefix_once_matches_the_whole_batch(counter_model):
    demos = _demos(counter_model)
    tokenizer = AutoTokenizer.from_pretrained(counter_model)
    model = AutoModelForCausalLM.from_pretrained(counter_model)
    settings = DemoLossSettings(weight=2.0, batch_size=8)
    out = []
    for share in (False, True):
        model.zero_grad()
        loss = DemoLoss(demos, tokenizer, settings, seed=0, share_prefix=share).loss(model, 3)
        loss.backward()
        out.append((float(loss), [p.grad.clone() for p in model.parameters()]))
    assert abs(out[0][0] - out[1][0]) < 1e-5
    for want, got in zip(out[0][1], out[1][1], strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-4)


def test_the_prefix_stops_before_the_first_label_and_steps_aside_without_one():
    ids = torch.arange(40).repeat(3, 1)
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    labels[1, 20:] = ids[1, 20:]
    assert prefix_cut(ids, mask, labels) == 19  # column 20's label needs column 19's output

    class Checkpointed:  # activation checkpointing turns the KV cache off: never called
        is_gradient_checkpointing = True

    class Wrapped:  # as DDP wraps it
        module = Checkpointed()

    assert prefix_once(Checkpointed(), ids, mask, labels) is None
    assert prefix_once(Wrapped(), ids, mask, labels) is None
    ids[2, 12] = 0
    assert prefix_cut(ids, mask, labels) == 12
    mask[0, 5] = 0  # a column not every row attends ends the prefix too
    assert prefix_cut(ids, mask, labels) == 5

    class Model:  # never called: a prefix under MIN_PREFIX steps aside before any forward
        is_gradient_checkpointing = False

    assert prefix_once(Model(), ids, mask, labels) is None
    assert prefix_once(Model(), ids, None, labels) is None  # padding-free batches
    assert prefix_once(Model(), ids[:1], mask[:1], labels[:1]) is None


def test_sft_trains_the_same_weights_with_the_prefix_once(counter_model, tmp_path):
    torch.manual_seed(0)
    demos = _demos(counter_model, 24)
    weights = []
    for share in (False, True):
        settings = SFTSettings(
            max_steps=3, batch_size=8, warmup_steps=0, learning_rate=1e-2, share_prefix=share,
            time_budget_s=None,
        )  # fmt: skip
        result = run_sft(counter_model, tmp_path / str(share), demos, settings, log_to_mlflow=False)
        model = AutoModelForCausalLM.from_pretrained(result["path"])
        weights.append({n: p.detach().clone() for n, p in model.named_parameters()})
    start = AutoModelForCausalLM.from_pretrained(counter_model)
    moved = max(float((weights[0][n] - p).abs().max()) for n, p in start.named_parameters())
    assert moved > 1e-2  # three steps at lr 1e-2 moved it: the comparison is not of two starts
    # Adam divides by the gradient's running size, so where a gradient is near 0 the float
    # noise of a different summation order moves a weight by up to ~5e-5: 1/200 of the move
    for name, w in weights[0].items():
        torch.testing.assert_close(weights[1][name], w, atol=1e-4, rtol=1e-3, msg=name)
