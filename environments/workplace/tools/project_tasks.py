"""Project-management tools (WorkBench ``project_management.*``): tasks on boards and lists.

A task is assigned to a team member (someone who already holds a task), sits in one list
(Backlog → In Progress → In Review → Completed) on one board, and has a due date.
"""

from __future__ import annotations

import re

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import contains, require

TABLE = "project_tasks"
FIELDS = ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board")
UPDATABLE = FIELDS[1:]
LISTS = ("Backlog", "In Progress", "In Review", "Completed")
BOARDS = ("Back end", "Front end", "Design")
_EMAIL = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$")


def _check_value(session: Sandbox, field: str, value: str) -> None:
    if field == "board" and value not in BOARDS:
        raise ValueError("Board not valid. Please choose from: 'Back end', 'Front end', 'Design'.")
    if field == "list_name" and value not in LISTS:
        raise ValueError(
            "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', "
            "'Completed'."
        )
    if field == "assigned_to_email" and not any(
        task["assigned_to_email"].lower() == value for task in session.rows(TABLE)
    ):
        raise ValueError("Assignee email not valid. Please choose from the list of team members.")


def project_management_get_task_information_by_id(
    session: Sandbox, task_id: str, field: str
) -> dict:
    """Returns the task information for a given ID.

    Args:
        task_id: 8-digit ID of the task
        field: Field to return. Available fields are: 'task_id', 'task_name',
            'assigned_to_email', 'list_name', 'due_date', 'board'
    """
    require(task_id, message="Task ID not provided.")
    require(field, message="Field not provided.")
    task = session.get(TABLE, task_id)
    if task is None:
        raise LookupError("Task not found.")
    if field not in task:
        raise ValueError("Field not found.")
    return {field: task[field]}


def project_management_search_tasks(
    session: Sandbox,
    task_name: str = "",
    assigned_to_email: str = "",
    list_name: str = "",
    due_date: str = "",
    board: str = "",
) -> list[dict]:
    """Searches for tasks based on the given parameters.

    Args:
        task_name: Name of the task
        assigned_to_email: Email address of the person assigned to the task
        list_name: Name of the list the task belongs to
        due_date: Due date of the task in YYYY-MM-DD format
        board: Name of the board the task belongs to
    """
    if not any((task_name, assigned_to_email, list_name, due_date, board)):
        raise ValueError("No search parameters provided.")
    if assigned_to_email and not _EMAIL.match(assigned_to_email):
        raise ValueError("Invalid email format for assigned_to_email.")
    return [
        dict(task)
        for task in session.rows(TABLE)
        if contains(task["task_name"], task_name)
        and (
            not assigned_to_email or task["assigned_to_email"].lower() == assigned_to_email.lower()
        )
        and contains(task["list_name"], list_name)
        and contains(task["due_date"], due_date)
        and contains(task["board"], board)
    ]


def project_management_create_task(
    session: Sandbox,
    task_name: str,
    assigned_to_email: str,
    list_name: str,
    due_date: str,
    board: str,
) -> str:
    """Creates a new task.

    Args:
        task_name: Name of the task
        assigned_to_email: Email address of the person assigned to the task
        list_name: Name of the list the task belongs to. One of: 'Backlog', 'In Progress',
            'In Review', 'Completed'
        due_date: Due date of the task in YYYY-MM-DD format
        board: Name of the board the task belongs to. One of: 'Back end', 'Front end', 'Design'
    """
    require(
        task_name, assigned_to_email, list_name, due_date, board, message="Missing task details."
    )
    assigned_to_email = assigned_to_email.lower()
    _check_value(session, "assigned_to_email", assigned_to_email)
    _check_value(session, "list_name", list_name)
    _check_value(session, "board", board)
    row = {
        "task_name": task_name,
        "assigned_to_email": assigned_to_email,
        "list_name": list_name,
        "due_date": due_date,
        "board": board,
    }
    return session.insert(TABLE, row)


def project_management_delete_task(session: Sandbox, task_id: str) -> str:
    """Deletes a task by ID.

    Args:
        task_id: 8-digit ID of the task
    """
    require(task_id, message="Task ID not provided.")
    if session.get(TABLE, task_id) is None:
        raise LookupError("Task not found.")
    session.delete(TABLE, task_id)
    return "Task deleted successfully."


def project_management_update_task(
    session: Sandbox, task_id: str, field: str, new_value: str
) -> str:
    """Updates a task by ID.

    Args:
        task_id: 8-digit ID of the task
        field: Field to update. Available fields are: 'task_name', 'assigned_to_email',
            'list_name', 'due_date', 'board'
        new_value: New value for the field
    """
    require(task_id, field, new_value, message="Task ID, field, or new value not provided.")
    if field == "assigned_to_email":
        new_value = new_value.lower()
    _check_value(session, field, new_value)
    if session.get(TABLE, task_id) is None:
        raise LookupError("Task not found.")
    if field not in UPDATABLE:  # NeMo Gym would also rewrite task_id; an id stays an id here
        raise ValueError("Field not valid.")
    session.update(TABLE, task_id, field, new_value)
    return "Task updated successfully."


TOOLS = (
    project_management_get_task_information_by_id,
    project_management_search_tasks,
    project_management_create_task,
    project_management_delete_task,
    project_management_update_task,
)
ACTIONS = frozenset(
    {
        "project_management_create_task",
        "project_management_delete_task",
        "project_management_update_task",
    }
)
