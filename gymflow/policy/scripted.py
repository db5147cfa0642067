"""A policy that answers from a script: for tests, benchmarks and verifier oracles.

``respond(task_prompt, turn, observations) -> text`` decides each turn's text. Token ids are
the UTF-8 bytes of the text (offset past the byte range of no real vocabulary), logprobs are
0.0; the agent loop, the env server and the rollout store see the same shapes as with a model.

:meth:`ScriptedPolicy.from_replies` answers from a file of prepared replies (``scripted:replies=
FILE``): served with ``gymflow policy serve``, it is a teacher or judge whose every answer is
known in advance, for testing what a caller does with an answer (parse, verify, dedup).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gymflow.policy.base import Generation

EOS = 1_000_000


class ScriptedPolicy:
    def __init__(self, respond: Callable[[str, int, list[str]], str]) -> None:
        self.respond = respond
        self._prompts: dict[tuple[int, ...], str] = {}
        self._lengths: set[int] = set()

    @classmethod
    def replay(cls, turns: list[str]) -> ScriptedPolicy:
        """Say ``turns[k]`` at turn ``k`` (the last one again after that), whatever comes back."""
        return cls(lambda prompt, turn, observations: turns[min(turn, len(turns) - 1)])

    @classmethod
    def from_replies(cls, path: Path) -> ScriptedPolicy:
        """Answer from ``path``, JSONL rows ``{"when": TEXT, "reply": TEXT}``: the first row
        whose ``when`` occurs in the prompt (a row without one matches any prompt). A prompt no
        row matches raises ``KeyError`` (a served request then fails with a 5xx)."""
        from gymflow.core.jsonl import read_jsonl, row_error

        rows = []
        for line, row in read_jsonl(path):
            if not isinstance(row.get("reply"), str) or not isinstance(row.get("when", ""), str):
                raise row_error(path, line, 'a reply row is {"when": text, "reply": text}')
            rows.append((row.get("when", ""), row["reply"]))

        def respond(prompt: str, turn: int, observations: list[str]) -> str:
            for when, reply in rows:
                if when in prompt:
                    return reply
            raise KeyError(f"no reply in {path} matches the prompt {prompt[:80]!r}")

        return cls(respond)

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        text = "\n".join(m["content"] for m in messages)
        ids = list(text.encode())
        self._prompts[tuple(ids)] = text
        self._lengths.add(len(ids))
        return ids

    def encode_observation(self, output: str, last: bool = True) -> list[int]:
        """Each output between two markers (a script has no assistant header to add)."""
        return [EOS + 1, *output.encode(), EOS + 2]

    def encode_assistant(self, text: str) -> list[int]:
        """Ids of an assistant turn, as ``generate`` returns them (served conversations)."""
        return [*text.encode(), EOS]

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        return [self._one(p) for p in prompts]

    def _one(self, ids: list[int]) -> Generation:
        prompt_text, turn, observations = self._state(ids)
        text = self.respond(prompt_text, turn, observations)
        out = [*text.encode(), EOS]
        return Generation(out, [0.0] * len(out), text, True)

    def _state(self, ids: list[int]) -> tuple[str, int, list[str]]:
        """Recover (prompt text, turn, observations so far) from the context ids."""
        for cut in sorted(self._lengths, reverse=True):
            prompt_text = self._prompts.get(tuple(ids[:cut]))
            if prompt_text is not None:
                break
        else:
            raise KeyError("context does not start with a prompt this policy encoded")
        rest, observations, turn = ids[cut:], [], 0
        while EOS in rest:
            turn += 1
            rest = rest[rest.index(EOS) + 1 :]
            while rest and rest[0] == EOS + 1:  # every output of the turn's calls
                end = rest.index(EOS + 2)
                observations.append(bytes(rest[1:end]).decode())
                rest = rest[end + 1 :]
        return prompt_text, turn, observations
