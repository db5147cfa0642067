"""Score Berkeley Function Calling Leaderboard (BFCL) tasks the way BFCL's AST checker does.

The rules are re-written from ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` of
``bfcl-eval==2026.3.23`` (``simple_function_checker``, ``type_checker``, ``standardize_string``,
``string_checker``, ``list_checker``, ``dict_checker``, ``list_dict_checker``,
``multiple_function_checker``, ``parallel_function_checker_no_order``) and from
``eval_checker/eval_runner.py::_evaluate_single_relevance_entry`` for "no call" tasks. BFCL is
not a dependency: its wheel pulls in ~30 packages (vllm-era pins of numpy, tree-sitter, every
vendor SDK, sentence-transformers, faiss) to run a 650-line pure function.

The rules, per call:

* the function name must be the expected one; a dotted name (``math.hypot``) may also be
  spelled with underscores (``math_hypot``), as BFCL does for APIs that forbid dots (it picks
  one spelling per model, so one answer must not mix them);
* every ``required`` parameter is present; no parameter outside the function doc or the
  possible answer; a possible-answer parameter that is absent must list ``""`` (optional);
* types are BFCL's (``dict integer float string boolean array tuple any``, ``any`` checked as a
  string); an integer is accepted for a ``float`` (Python's int→float), not inside lists; a
  value whose type is the *possible answer's* type instead (a variable name) is compared as is;
  list items get one level of nested type check;
* strings compare after removing spaces and ``,./-_*^``, lower-casing and ``'``→``"``, also
  inside lists and dict values; dicts match one allowed dict key by key; lists of dicts match
  position by position; anything else must be one of the allowed values (``==``).

Categories: ``simple`` (v3) / ``simple_python``, ``multiple``, ``parallel``,
``parallel_multiple``, ``irrelevance`` and their ``live_`` versions. Parallel tasks are one
assistant turn holding several calls (the Responses API's parallel tool calls), matched in
any order greedily, as BFCL does. Irrelevance tasks succeed when the answer is plain text.
Not covered: Java / JavaScript (values are source literals needing BFCL's converters),
``live_relevance`` (no possible answers, so no gold to demonstrate), multi-turn, memory,
web search, format sensitivity.

Reward, on the environment's scale: −1 when the output is malformed (even on an irrelevance
task, where BFCL would count a failed parse as "no call": here it is a broken call), when a
call task gets no call, or a single-call task gets several; otherwise +0.4 when the called
functions are the expected ones, +0.4 × the share of expected calls BFCL accepts, +0.2 (BFCL
has no unsafe actions). Success is exactly BFCL's verdict. A failure's ``detail`` starts with
BFCL's ``error_type`` (``simple_function_checker:missing_required``, ``value_error:string``...).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.environments.tool_call.verifier import assistant_outputs, format_failure

PY_TYPES = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
IRRELEVANCE = ("irrelevance", "live_irrelevance")
CALL_CATEGORIES = (
    "simple",
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
CATEGORIES = CALL_CATEGORIES + IRRELEVANCE
_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class Verdict:
    """BFCL's answer for one call or one answer: ``error_type`` is empty when valid."""

    error_type: str = ""
    detail: str = ""
    is_variable: bool = False

    @property
    def valid(self) -> bool:
        return not self.error_type


OK = Verdict()


def standardize(text: str) -> str:
    """BFCL's string normalisation: 'April 1, 2024' and 'april 1 2024' compare equal.

    >>> standardize("April 1, 2024") == standardize("april 1 2024")
    True
    """
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def names_match(expected: str, given: str) -> bool:
    return given == expected or ("." in expected and given == expected.replace(".", "_"))


def check_call(doc: dict, name: str, args: dict, answer: dict) -> Verdict:
    """One call against one possible answer ``{function: {param: [allowed...]}}``."""
    allowed = next(iter(answer.values()))
    if not names_match(doc["name"], name):
        return Verdict("simple_function_checker:wrong_func_name", f"expected {doc['name']}")
    props = doc["parameters"]["properties"]
    for param in doc["parameters"].get("required", []):
        if param not in args:
            return Verdict("simple_function_checker:missing_required", repr(param))
    for param, value in args.items():
        if param not in props or param not in allowed:
            return Verdict("simple_function_checker:unexpected_param", repr(param))
        verdict = check_param(param, value, props[param], allowed[param])
        if not verdict.valid:
            return verdict
    for param, values in allowed.items():
        if param not in args and "" not in values:
            return Verdict("simple_function_checker:missing_optional", repr(param))
    return OK


def check_param(param: str, value: object, detail: dict, allowed: list) -> Verdict:
    """Type, then value, of one argument (``simple_function_checker``'s loop body)."""
    kind = detail["type"]
    expected = PY_TYPES[kind]
    nested = PY_TYPES[detail["items"]["type"]] if kind in ("array", "tuple") else None
    if kind == "float" and type(value) is int:
        value = float(value)  # Python would convert an int argument for a float parameter
    typed = check_type(param, value, allowed, expected, nested)
    if not typed.valid:
        return typed
    if not typed.is_variable:
        if expected is dict:
            return check_dict(param, value, allowed)
        if expected is list and nested is dict:
            return check_list_of_dicts(param, value, allowed)
        if expected is str:
            if standardize(value) in [standardize(a) for a in allowed if type(a) is str]:
                return OK
            return Verdict("value_error:string", f"{param}={value!r}, allowed {allowed}")
        if expected is list:
            if _std_list(value) in [_std_list(a) for a in allowed if _sized(a)]:
                return OK
            return Verdict("value_error:list/tuple", f"{param}={value!r}, allowed {allowed}")
    if value not in allowed:
        return Verdict("value_error:others", f"{param}={value!r}, allowed {allowed}")
    return OK


def check_type(param: str, value: object, allowed: list, expected: type, nested: type | None):
    """BFCL's ``type_checker``: the declared type, or the possible answer's type (a variable)."""
    answer_type = next((type(a) for a in allowed if a != ""), None)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return Verdict(is_variable=is_variable)
        for item in allowed:  # some allowed value whose items all type-check (one level deep)
            if type(item) is not list or all(
                check_type(param, v, item, nested, None).valid for v in value
            ):
                return Verdict(is_variable=is_variable)
        return Verdict("type_error:nested", f"{param}: items of {value!r} are not {nested}")
    if answer_type is not None and type(value) is answer_type:
        return Verdict(is_variable=True)
    return Verdict("type_error:simple", f"{param}: {type(value).__name__}, expected {expected}")


def check_dict(param: str, value: dict, allowed: list) -> Verdict:
    """Some allowed dict matches key by key (values normalised); absent keys must allow ""."""
    last = Verdict("dict_checker:unclear", f"{param}: no allowed dict")
    for option in allowed:
        if option == "":
            continue
        last = _dict_mismatch(param, value, option)
        if last.valid:
            return OK
    return last


def check_list_of_dicts(param: str, value: list, allowed: list) -> Verdict:
    """Some allowed list of dicts has the same length and matches position by position."""
    last = Verdict("list_dict_checker:unclear", f"{param}: no allowed list")
    for option in allowed:
        if not _sized(option) or len(value) != len(option):
            last = Verdict("value_error:list_dict_count", f"{param}: {len(value)} dicts")
            continue
        for given, wanted in zip(value, option, strict=True):
            last = check_dict(param, given, [wanted])
            if not last.valid:
                break
        else:
            return OK
    return last


def _dict_mismatch(param: str, value: object, option: object) -> Verdict:
    if not isinstance(value, dict):
        return Verdict("value_error:dict_value", f"{param}: {value!r} is not a dict")
    if not isinstance(option, dict):
        return Verdict("value_error:dict_key", f"{param}: allowed value is not a dict")
    for key, item in value.items():
        if key not in option:
            return Verdict("value_error:dict_key", f"{param}: unexpected key {key!r}")
        std = standardize(item) if type(item) is str else item
        if std not in [standardize(a) if type(a) is str else a for a in option[key]]:
            return Verdict("value_error:dict_value", f"{param}[{key!r}]={item!r}")
    for key, values in option.items():
        if key not in value and "" not in values:
            return Verdict("value_error:dict_key", f"{param}: missing key {key!r}")
    return OK


def _std_list(items: object) -> list:
    # BFCL indexes an allowed value: "" (optional) becomes [], so an empty list matches it
    return [standardize(x) if type(x) is str else x for x in items]


def _sized(item: object) -> bool:
    return isinstance(item, (list, str))


def check_answer(case: dict, calls: list[tuple[str, dict]]) -> tuple[Verdict, int]:
    """BFCL's verdict on all ``calls`` and how many expected calls were matched."""
    docs = {doc["name"]: doc for doc in case["functions"]}
    answers = case["answer"]
    if len(calls) != len(answers):
        return Verdict("wrong_count", f"{len(calls)} calls, expected {len(answers)}"), 0
    if _mixed_spelling(docs, calls):  # BFCL renames dots for a model's every call, or none
        return Verdict("simple_function_checker:wrong_func_name", "dots and underscores mixed"), 0
    if "parallel" not in case["category"]:
        name, args = calls[0]
        return check_call(docs[next(iter(answers[0]))], name, args, answers[0]), 0
    unmatched, first_miss = list(range(len(calls))), OK
    for answer in answers:  # greedy, in the possible answer's order, like BFCL
        doc = docs[next(iter(answer))]
        tried = [(i, check_call(doc, *calls[i], answer)) for i in unmatched]
        hit = next((i for i, verdict in tried if verdict.valid), None)
        if hit is None:
            if first_miss.valid:
                first_miss = Verdict(
                    "parallel_function_checker_no_order:cannot_find_match",
                    f"no call matches {doc['name']}: "
                    + "; ".join(f"{v.error_type} {v.detail}" for _, v in tried),
                )
            continue
        unmatched.remove(hit)
    return first_miss, len(calls) - len(unmatched)


def _mixed_spelling(docs: dict, calls: list[tuple[str, dict]]) -> bool:
    dotted = [name for name in docs if "." in name]
    exact = any(name in dotted for name, _ in calls)
    aliased = any(
        name not in docs and any(names_match(d, name) for d in dotted) for name, _ in calls
    )
    return exact and aliased


def score(case: dict, items: list[dict]) -> Score:
    """Score the assistant's output ``items`` (Responses-style) on one imported BFCL task."""
    outputs, failure = assistant_outputs(items)
    if failure:
        return failure
    calls = []
    for it in (it for it in outputs if it.get("type") == "function_call"):
        try:
            arguments = json.loads(it.get("arguments", ""))
        except (ValueError, TypeError, RecursionError) as exc:
            return format_failure(FailureKind.INVALID_JSON, f"arguments are not JSON: {exc}")
        if not isinstance(arguments, dict) or not isinstance(it.get("name"), str):
            return format_failure(FailureKind.INVALID_JSON, "arguments must be a JSON object")
        calls.append((it["name"], arguments))
    if calls and len(outputs) > len(calls):
        return format_failure(FailureKind.MULTIPLE_CALLS, "text beside the tool calls")
    if case["category"] in IRRELEVANCE:
        if calls:
            names = ", ".join(name for name, _ in calls)
            return _graded(
                0.0, 0.0, FailureKind.WRONG_TOOL, f"irrelevance_error:decoder_success {names}"
            )
        return _graded(1.0, 1.0, None, "")
    if not calls:
        return format_failure(FailureKind.NO_TOOL_CALL, "the answer holds no tool call")
    parallel = "parallel" in case["category"]
    if len(calls) > 1 and not parallel:
        return format_failure(FailureKind.MULTIPLE_CALLS, f"{len(calls)} calls, expected one")
    return _grade_calls(case, calls)


def _grade_calls(case: dict, calls: list[tuple[str, dict]]) -> Score:
    answers = case["answer"]
    expected = sorted(next(iter(a)) for a in answers)
    given = sorted(_spelled_as(expected, name) for name, _ in calls)
    tool = 1.0 if given == expected else 0.0
    verdict, matched = check_answer(case, calls)
    if verdict.valid:
        return _graded(1.0, 1.0, None, "")
    args = matched / len(answers)
    if verdict.error_type == "wrong_count":
        kind = FailureKind.MULTIPLE_CALLS
    elif tool == 0.0 or verdict.error_type.endswith("wrong_func_name"):
        known = {doc["name"] for doc in case["functions"]}
        unknown = [n for n, _ in calls if not any(names_match(k, n) for k in known)]
        kind = FailureKind.UNKNOWN_TOOL if unknown else FailureKind.WRONG_TOOL
    else:
        kind = FailureKind.BAD_ARGUMENTS
    return _graded(tool, args, kind, f"{verdict.error_type} {verdict.detail}".strip())


def _spelled_as(expected: list[str], given: str) -> str:
    """The expected name ``given`` spells (dots as underscores allowed), else ``given``."""
    return next((name for name in expected if names_match(name, given)), given)


def _graded(tool: float, args: float, kind: FailureKind | None, detail: str) -> Score:
    comps = {"format": 1.0, "tool": tool, "args": args, "safe": 1.0}
    reward = round(0.4 * tool + 0.4 * args + 0.2, 6)
    return Score(
        reward=reward, success=kind is None, failure_kind=kind, components=comps, detail=detail
    )
