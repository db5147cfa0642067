"""The company directory (WorkBench ``company_directory.find_email_address``): 20 colleagues."""

from __future__ import annotations

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import require


def company_directory_find_email_address(session: Sandbox, name: str = "") -> list[str]:
    """Finds all email addresses containing the given name (case-insensitive search).

    Args:
        name: Name or partial name to search for in email addresses
    """
    require(name, message="Name not provided.")
    return [address for address in session.base.directory if name.lower() in address.lower()]


TOOLS = (company_directory_find_email_address,)
ACTIONS: frozenset[str] = frozenset()
