"""The 27 workplace tools, typed callables taking the session's :class:`Sandbox`.

Names, parameters, types and required lists are those of NeMo Gym's ``workplace_assistant``
schemas (checked in the tests); behaviour follows NeMo Gym's port of WorkBench's tools.
``ACTIONS`` names the 14 tools that change the sandbox; the others only read it.
"""

from __future__ import annotations

from gymflow.environments.workplace.tools import (
    analytics,
    calendar_events,
    company_directory,
    crm,
    emails,
    project_tasks,
)

_MODULES = (company_directory, emails, calendar_events, analytics, project_tasks, crm)
TOOLS = tuple(fn for module in _MODULES for fn in module.TOOLS)
ACTIONS = frozenset().union(*(module.ACTIONS for module in _MODULES))
