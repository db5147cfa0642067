"""The transformers backend: a local causal LM generating token ids with sampling logprobs."""

from __future__ import annotations

from pathlib import Path

from gymflow.policy.base import Generation
from gymflow.policy.cache_names import cache_keyword, returned_cache
from gymflow.policy.decode_cache import with_room


class TokenizerEncoding:
    """Prompt, observation and assistant-turn encoding with a transformers tokenizer.

    Shared by the transformers and vLLM backends. A tool result is written as the chat template
    writes a ``tool`` message (:func:`gymflow.policy.template_check.observation_text`; for the
    embedded model's ChatML, ``<|im_start|>tool`` turns), so a conversation encodes to the same
    ids in-process and through :mod:`gymflow.policy.openai_server`.
    """

    tokenizer: object
    eos_id: int
    _observation = None

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return list(ids)

    def encode_observation(self, output: str, last: bool = True) -> list[int]:
        if self._observation is None:
            from gymflow.policy.template_check import observation_text, unusable

            try:
                self._observation = observation_text(self.tokenizer)
            except ValueError as exc:
                raise unusable(str(self.tokenizer.name_or_path), str(exc)) from None
        o = self._observation
        text = o.first + output + (o.last if last else o.between)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_assistant(self, text: str) -> list[int]:
        """One assistant turn's ids (re-tokenized from text) ending with EOS."""
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.eos_id]


class TransformersPolicy(TokenizerEncoding):
    """A causal LM sampling token ids on whatever device its weights are on (the inputs follow
    the model: a trainer that moved it to CUDA rolls out there; ``from_path`` places it)."""

    def __init__(self, model, tokenizer, batch_size: int = 64) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @classmethod
    def from_path(
        cls, path: str | Path, batch_size: int = 64, device: str = "auto"
    ) -> TransformersPolicy:
        """Load a checkpoint (fp32) onto ``device``: ``"auto"`` is CUDA when there is a GPU,
        else the CPU (:func:`gymflow.policy.device.torch_device`)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from gymflow.policy.checkpoints import checkpoint_folder
        from gymflow.policy.device import torch_device

        where = torch_device(device)  # a bad name fails before any loading

        # checked (unusable_checkpoint); a .gguf, catalog: or adapted folder made once
        path = checkpoint_folder(path)
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(where)
        model.eval()
        return cls(model, tokenizer, batch_size)

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        import torch

        row_seeds = seed if isinstance(seed, list) else None
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ValueError(f"{len(row_seeds)} seeds for {len(prompts)} prompts")
        if isinstance(seed, int):
            torch.manual_seed(seed)
        out: list[Generation] = []
        with torch.no_grad():
            for start in range(0, len(prompts), self.batch_size):
                batch = prompts[start : start + self.batch_size]
                seeds = row_seeds[start : start + self.batch_size] if row_seeds else None
                out.extend(self._batch(batch, max_new_tokens, temperature, greedy, seeds))
        return out

    def _prefill(self, prompts: list[tuple[int, ...]], device):
        """``(KV cache, last logits, attention mask, positions)`` of the distinct ``prompts``,
        left-padded. Their common prefix (an environment's system turn and tool schemas: 62 of
        the embedded default's ~77 prompt tokens) runs once and its cache rows are repeated;
        each prompt's rest follows it, left-padded, so the mask has a gap where a shorter
        rest is padded. Positions count attended tokens, so they are the unpadded ones."""
        import torch

        cut = common_prefix(prompts)
        n = len(prompts)
        rest = [p[cut:] for p in prompts]
        width = max(map(len, rest))
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(rest):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        past = None
        if cut:
            head = torch.tensor([prompts[0][:cut]], device=device)
            past = returned_cache(self.model(input_ids=head, use_cache=True, logits_to_keep=1))
            past.batch_select_indices(torch.zeros(n, dtype=torch.long, device=device))
            mask = torch.cat([mask.new_ones((n, cut)), mask], dim=1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions[:, cut:],
            use_cache=True, logits_to_keep=1, **{cache_keyword(self.model): past},
        )  # fmt: skip
        return returned_cache(out), out.logits[:, -1, :], mask, positions

    def _batch(
        self,
        prompts: list[list[int]],
        max_new: int,
        temperature: float,
        greedy: bool,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        import torch

        from gymflow.policy.device import model_device

        device = model_device(self.model)
        # Seeded rows: each row draws its uniforms for the whole turn from its own generator up
        # front, then every token step samples all rows at once by inverting their CDFs. A row
        # samples the same tokens whatever its batch-mates (the sliding window mixes episodes by
        # timing), without a multinomial call per row and token (~30 µs each, a tenth of an
        # instant GRPO step's rollout).
        uniforms = (
            torch.stack(
                [torch.rand(max_new, generator=torch.Generator().manual_seed(s)) for s in seeds]
            )
            if seeds and not greedy
            else None
        )  # drawn on the CPU, so a seed gives the same uniforms on any device
        if uniforms is not None:
            uniforms = uniforms.to(device)

        # A plain KV-cached decode loop instead of ``model.generate``: the same math with less
        # per-token overhead, which dominates at this model size (rollouts are most of a GRPO step).
        # Identical prompts (a GRPO group's G samples) are prefilled once and their KV cache
        # copied, and so is the prefix every prompt starts with (_prefill): prefill is about
        # half the generation time and compute-bound on a CPU.
        unique: dict[tuple[int, ...], int] = {}
        row_of = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
        batch = len(prompts)
        was_training = self.model.training
        self.model.eval()
        past, logits, mask, positions = self._prefill(list(unique), device)
        rows = None
        if len(unique) < batch:
            rows = torch.tensor(row_of, device=device)
            logits, mask, positions = logits[rows], mask[rows], positions[rows]
        # tokens are written in place from here (decode_cache); the mask spans the cache's width
        past, width = with_room(self.model, past, rows, max_new)
        written = mask.shape[1]
        if width is not None:
            mask = torch.cat([mask, mask.new_zeros((batch, width - written))], dim=1)
        next_pos = positions[:, -1:] + 1
        keyword = cache_keyword(self.model)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        tokens, logps = [], []
        for step in range(max_new):
            logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), dim=-1)
            if greedy:
                tok = logp.argmax(-1)
            elif uniforms is not None:
                cdf = logp.exp().cumsum(-1)
                drawn = uniforms[:, step : step + 1] * cdf[:, -1:]
                tok = (
                    torch.searchsorted(cdf, drawn, right=True)
                    .squeeze(-1)
                    .clamp(max=cdf.shape[-1] - 1)
                )
            else:
                tok = torch.multinomial(logp.exp(), 1).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp.gather(-1, tok[:, None]).squeeze(-1))
            done |= tok == self.eos_id
            if bool(done.all()) or step == max_new - 1:
                break  # (the last token's forward would feed nothing)
            if width is None:
                mask = torch.cat([mask, mask.new_ones((batch, 1))], dim=1)
            else:
                mask[:, written] = 1
            written += 1
            out = self.model(
                input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos,
                use_cache=True, **{keyword: past},
            )  # fmt: skip
            past, logits = returned_cache(out), out.logits[:, -1, :]
            next_pos = next_pos + 1
        if was_training:
            self.model.train()
        seqs = torch.stack(tokens, dim=1).tolist()
        chosen = torch.stack(logps, dim=1).tolist()
        gens = []
        for i in range(batch):
            row = seqs[i]
            finished = self.eos_id in row
            n = row.index(self.eos_id) + 1 if finished else len(row)
            gens.append(Generation.decoded(row[:n], chosen[i][:n], finished, self.tokenizer))
        return gens


MIN_PREFIX = 8
"""A common prefix shorter than this runs with the rest (a second forward call costs more): in
generation's prefill here and in training's forward (:mod:`gymflow.train.shared_prefix`)."""


def common_prefix(prompts: list[tuple[int, ...]]) -> int:
    """Tokens every prompt starts with, when at least two prompts share :data:`MIN_PREFIX` and
    each keeps one of its own after them (its next-token logits come from that pass); else 0.

    >>> common_prefix([tuple(range(12)), tuple(range(10)) + (99,)])
    10
    >>> common_prefix([tuple(range(12))] * 2), common_prefix([tuple(range(12))])
    (11, 0)
    """
    if len(prompts) < 2:
        return 0
    shortest = min(map(len, prompts)) - 1
    n = 0
    while n < shortest and all(p[n] == prompts[0][n] for p in prompts):
        n += 1
    return n if n >= MIN_PREFIX else 0
