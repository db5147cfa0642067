"""The workplace verifier: a pure function from (ground truth, trajectory items) to a Score.

Scoring is by outcome, as in WorkBench: the gold calls and the episode's calls are replayed on
two fresh sandboxes and the resulting states compared
(:mod:`gymflow.environments.workplace.outcome`).
Searches and other reads are never required; a task whose gold is ``[]`` asks that nothing
change, and scores 1 exactly when nothing did.

Which calls are replayed: those the episode executed, i.e. the ``function_call`` items that
have a ``function_call_output`` (calls in a last turn cut off by ``max_turns`` never ran, so
they do not count). A trajectory with no outputs at all is an answer scored offline (NeMo Gym
rows, ``gymflow verify``, profiling): then every call counts, as NeMo Gym's verifier does.

Reward: 1.0 for exactly the gold outcome, else 0.0 — no partial credit, because a half-done or
over-done change to someone's mailbox or CRM is not half right, and a lenient outcome score is
easy to hack (changing many records earns credit for the right ones). A malformed assistant turn
scores 0.0 (``invalid_json``) whatever the state. Components, for diagnosis only: ``outcome``,
``gold_changes_done`` (share of the gold's changed records the episode got right),
``unwanted_changes`` (records changed that the gold leaves alone, extra records),
``invalid_calls`` (calls refused by the schema or the tool, and calls to unknown tools). Failure
kinds, first that applies: ``invalid_json``, ``no_tool_call`` (no call at all),
``unsafe_action`` (an unwanted change), ``unknown_tool``, ``wrong_tool`` (a tool the gold needs
was never tried), ``bad_arguments`` (the right tools with wrong ids or values).
"""

from __future__ import annotations

import json

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.environments.workplace.outcome import Diff, Replay, compare, replay


def score(ground_truth: dict, items: list[dict]) -> Score:
    """Score the episode ``items`` (Responses-style) against ``ground_truth["calls"]``."""
    malformed = next(
        (it for it in items if it.get("type") == "message" and it.get("parse_error")), None
    )
    calls = executed_calls(items)
    episode = replay(calls)
    gold = gold_replay(ground_truth["calls"])
    diff = compare(episode.sandbox, gold.sandbox)
    done = diff.gold_changes - len(diff.missing)
    comps = {
        "outcome": float(diff.same),
        "gold_changes_done": done / diff.gold_changes if diff.gold_changes else 1.0,
        "unwanted_changes": float(len(diff.unwanted)),
        "invalid_calls": float(episode.invalid_calls + episode.unknown_tools),
    }
    if malformed is not None:
        comps["outcome"] = 0.0
        return Score(0.0, False, FailureKind.INVALID_JSON, comps, malformed["parse_error"])
    if diff.same:
        return Score(1.0, True, None, comps, "")
    kind = _failure_kind(calls, episode, gold, diff)
    return Score(0.0, False, kind, comps, "; ".join((diff.unwanted + diff.missing)[:3]))


def executed_calls(items: list[dict]) -> list[tuple[str, object]]:
    """``(name, arguments)`` of the calls that ran (see the module docstring), in order.

    Arguments that are not JSON become ``None`` (refused by the replay, as by the server).
    """
    ran = {it.get("call_id") for it in items if it.get("type") == "function_call_output"}
    calls = []
    for it in items:
        if it.get("type") != "function_call" or (ran and it.get("call_id") not in ran):
            continue
        try:
            arguments = json.loads(it.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):
            arguments = None
        calls.append((str(it.get("name")), arguments))
    return calls


def gold_replay(calls: list[dict]) -> Replay:
    """The outcome of the gold ``[{"name", "arguments"}]``.

    Not cached: a replay takes ~0.07 ms on a generated task (as long as the episode's own
    replay), and a cache keyed by client-sent ground truths grew by megabytes per request.
    """
    return replay((c["name"], c["arguments"]) for c in calls)


def _failure_kind(calls: list, episode: Replay, gold: Replay, diff: Diff) -> FailureKind:
    if not calls:
        return FailureKind.NO_TOOL_CALL
    if diff.unwanted:
        return FailureKind.UNSAFE_ACTION
    if episode.unknown_tools:
        return FailureKind.UNKNOWN_TOOL
    if set(gold.actions_done) - episode.actions_tried:
        return FailureKind.WRONG_TOOL
    return FailureKind.BAD_ARGUMENTS
