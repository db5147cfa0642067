"""The ground truth a resources server scores against: the tasks it holds, not what clients send.

A task's ground truth decides its reward, and for some environments it is code the verifier
runs (``code``'s hidden tests). So a server others can reach holds its own tasks (loaded when
it starts: ``gymflow env serve NAME --tasks FILE``) and a session is seeded by ``task_id``:
``POST /seed_session {"task_id": "..."}``. A client that sends a whole task (what
:class:`~gymflow.env.client.EnvClient` does, so one client serves both kinds of server) gets the
server's copy when the ids and ground truths match, and a refusal when they do not: a
client-supplied ground truth is never scored. Only a store built with
``trust_client_tasks=True`` (``--trust-client-tasks``; the default of an app used in-process,
where the caller is the program itself) takes the client's task as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from gymflow.core.failures import FailureKind
from gymflow.core.task_record import Task
from gymflow.env.sessions import RequestError


class TaskStore:
    """Tasks by id, and whether the server takes tasks its clients send."""

    def __init__(self, tasks: Iterable[Task] = (), trust_client_tasks: bool = False) -> None:
        self.trust_client_tasks = trust_client_tasks
        self.tasks: dict[str, Task] = {}
        for task in tasks:
            held = self.tasks.setdefault(task.task_id, task)
            if held.ground_truth != task.ground_truth or held.env != task.env:
                raise ValueError(f"two different tasks have the id {task.task_id!r}")

    def __len__(self) -> int:
        return len(self.tasks)

    def task_for(self, env_name: str, task: Task | None, task_id: str | None) -> Task:
        """The task a seed request names (exactly one of ``task`` or ``task_id``), or raise a
        :class:`RequestError` saying why the server will not score it."""
        if (task is None) == (task_id is None):
            raise RequestError(422, FailureKind.BAD_REQUEST, "send exactly one of task_id and task")
        if task is not None and self.trust_client_tasks:
            return task
        wanted = task_id if task is None else task.task_id
        held = self.tasks.get(wanted)
        if held is None or held.env != env_name:
            raise self._unknown(env_name, wanted, sent_task=task is not None)
        if task is not None and (task.ground_truth != held.ground_truth or task.env != held.env):
            raise RequestError(
                403,
                FailureKind.UNAUTHORIZED,
                f"task {wanted!r} differs from this server's copy: it scores only the ground "
                "truth it holds (seed by task_id, or start it with --trust-client-tasks)",
            )
        return held

    def _unknown(self, env_name: str, task_id: str, sent_task: bool) -> RequestError:
        held = f"the {len(self.tasks)} task(s) it loaded" if self.tasks else "its tasks (none)"
        how = f"start it with --tasks FILE holding {task_id!r}"
        if sent_task:  # a whole task from the client: its ground truth is what is refused
            return RequestError(
                403,
                FailureKind.UNAUTHORIZED,
                f"this {env_name} server scores only its own tasks and {task_id!r} is not among "
                f"{held}: {how}, or --trust-client-tasks to score what clients send",
            )
        return RequestError(
            404,
            FailureKind.BAD_REQUEST,
            f"no task {task_id!r} among {held} of this {env_name} server: {how}",
        )
