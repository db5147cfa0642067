"""One-off check, not collected by pytest: every BFCL ground truth in an unzipped wheel succeeds.

    pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/w
    python environments/tool_call/tests/check_bfcl_full.py /tmp/bfcl/w/bfcl_eval/data

Prints successes / tasks per file and every failure. Seven ground truths fail (2026.3.23): their
possible answers name a parameter the function doc lacks, or leave out a required one, so
BFCL's own checker rejects them too.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import load_tasks
from gymflow.environments.tool_call import ToolCallEnvironment
from gymflow.environments.tool_call.bfcl import CATEGORIES


def main(data: Path) -> int:
    env, failures, total = ToolCallEnvironment(), [], 0
    names = ["simple_python" if c == "simple" else c for c in CATEGORIES]
    for name in dict.fromkeys(names):
        path = data / f"BFCL_v4_{name}.json"
        tasks = load_tasks(env, path, "bfcl")
        ok = 0
        for task in tasks.values():
            items = prompt_items(task.prompt) + assistant_items(env.gold_text(task), 0)
            score = env.verify(task, items)
            ok += score.success
            if not score.success:
                failures.append(f"  {task.task_id}: {score.failure_kind} {score.detail[:160]}")
        total += len(tasks)
        print(f"{name}: {ok} / {len(tasks)}")
    print(f"all: {total - len(failures)} / {total}", *failures, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
