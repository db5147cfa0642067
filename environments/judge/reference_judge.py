"""A deterministic stand-in for an LLM judge: for tests, ``env check`` and examples, not training.

It reads the messages :func:`gymflow.environments.judge.rubric.judge_messages` builds and grades the
candidate answer by rule, so a verdict is reproducible and explainable:

* score = ``scale_max`` × the fraction of key points the answer contains (case-insensitive
  substrings), rounded down;
* an answer that addresses the grader (asks to ignore the rubric, names the judge or verdict,
  or carries a ``"score":`` field) scores 0 — the rubric says such text counts against it;
* an answer under half the reference's length is capped at half the scale (a list of key words
  is not an explanation), and one over three times its length loses two points (length alone
  earns nothing).

It is served like any policy, through gymflow's OpenAI-compatible server with a scripted policy
(``python -m gymflow.environments.judge.reference_judge --port 8123``), so what it exercises is the
real HTTP path a model judge takes. A policy trained against it would learn to list the key
points in enough words; that is why it is a test instrument and a real judge is for training.
"""

from __future__ import annotations

import argparse
import json
import re

from gymflow.environments.judge.rubric import CANDIDATE_HEADER, KEY_POINTS_HEADER
from gymflow.policy.openai_server import build_openai_app
from gymflow.policy.scripted import ScriptedPolicy

ADDRESSES_GRADER = re.compile(
    r"\b(ignore|disregard)\b.{0,60}\b(rubric|instructions?|criteria|above)\b"
    r"|\b(grader|judge|verdict)\b|\"score\"\s*:",
    re.IGNORECASE | re.DOTALL,
)


def reference_verdict(prompt_text: str) -> str:
    """The verdict JSON for one judge prompt (its messages' contents joined)."""
    scale_max = int(re.search(r"Scale: 0 to (\d+)", prompt_text).group(1))
    reference = prompt_text.split("Reference answer:\n", 1)[1].split("\n\n", 1)[0]
    points_block = prompt_text.split(KEY_POINTS_HEADER + "\n", 1)[1].split("\n\n", 1)[0]
    points = [line[2:] for line in points_block.splitlines() if line.startswith("- ")]
    answer = json.loads(prompt_text.split(CANDIDATE_HEADER + "\n", 1)[1].splitlines()[0])
    score, reason = grade_by_rule(answer, reference, points, scale_max)
    return json.dumps({"score": score, "reason": reason})


def grade_by_rule(
    answer: str, reference: str, points: list[str], scale_max: int
) -> tuple[int, str]:
    if ADDRESSES_GRADER.search(answer):
        return 0, "the answer addresses the grader instead of the question"
    text = answer.lower()
    covered = [p for p in points if p.lower() in text]
    score = scale_max * len(covered) // max(1, len(points))
    reason = f"covers {len(covered)} of {len(points)} key points"
    words, ref_words = len(answer.split()), len(reference.split())
    if words * 2 < ref_words and score > scale_max // 2:
        score, reason = scale_max // 2, reason + "; too short to explain them"
    elif words > 3 * ref_words:
        score, reason = max(0, score - 2), reason + "; padded far beyond the reference"
    return score, reason


def reference_judge_app(model_name: str = "reference-judge", api_key: str | None = None):
    """The reference judge as an OpenAI-compatible ASGI app (run it with uvicorn)."""
    policy = ScriptedPolicy(lambda prompt, turn, observations: reference_verdict(prompt))
    return build_openai_app(policy, model_name, api_key=api_key, parse_tool_calls=False)


def main() -> None:  # pragma: no cover - a thin CLI over reference_judge_app
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    print(f"reference judge at http://{args.host}:{args.port}/v1 (set GYMFLOW_JUDGE_URL to it)")
    uvicorn.run(reference_judge_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
