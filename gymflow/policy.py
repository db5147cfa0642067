"""The transformers policy backend: batched generation with per-token sampling logprobs.

One call generates for many episodes at once (left-padded batches), which is where CPU
throughput comes from (~4,600 tokens/s at batch 64 vs ~280 at batch 1 for the 3.6 M model).
Sampling uses the full distribution (``top_k=0, top_p=1``) so the logprobs returned are the
policy's own, as GRPO's importance ratio assumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    """Completion tokens, ending with EOS when ``finished``."""
    logprobs: list[float]
    text: str
    """Decoded completion without EOS / padding (special tool-call tokens kept)."""
    finished: bool


class TransformersPolicy:
    def __init__(self, model, tokenizer, batch_size: int = 64) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @classmethod
    def from_path(cls, path: str | Path, batch_size: int = 64) -> TransformersPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return cls(model, tokenizer, batch_size)

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return list(ids)

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | None = None,
    ) -> list[Generation]:
        if seed is not None:
            torch.manual_seed(seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.batch_size):
            out.extend(
                self._batch(
                    prompts[start : start + self.batch_size], max_new_tokens, temperature, greedy
                )
            )
        return out

    def _batch(
        self, prompts: list[list[int]], max_new: int, temperature: float, greedy: bool
    ) -> list[Generation]:
        width = max(map(len, prompts))
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        was_training = self.model.training
        self.model.eval()
        sample_kw = {} if greedy else {"temperature": temperature, "top_k": 0, "top_p": 1.0}
        res = self.model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            max_new_tokens=max_new,
            do_sample=not greedy,
            output_scores=True,
            return_dict_in_generate=True,
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            use_cache=True,
            **sample_kw,
        )
        if was_training:
            self.model.train()
        seqs = res.sequences[:, width:]
        logps = torch.stack(res.scores, dim=1).float().log_softmax(-1)
        chosen = logps.gather(-1, seqs[:, : logps.shape[1]].unsqueeze(-1)).squeeze(-1)
        gens = []
        for i in range(len(prompts)):
            ids = seqs[i].tolist()
            finished = self.eos_id in ids
            n = ids.index(self.eos_id) + 1 if finished else len(ids)
            ids = ids[:n]
            text = self.tokenizer.decode(ids[:-1] if finished else ids, skip_special_tokens=False)
            text = text.replace(self.tokenizer.pad_token or "", "")
            gens.append(Generation(ids, chosen[i, :n].tolist(), text, finished))
        return gens
