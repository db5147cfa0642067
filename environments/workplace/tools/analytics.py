"""Analytics tools (WorkBench ``analytics.*``): website visits per day, and plots.

The 1000 visits are read-only; the only state these tools change is the list of plots
(``analytics_create_plot``), which is what WorkBench compares for this domain. Counts are per
day (``{date: value}``, dates ascending), as WorkBench's pandas ``groupby`` returns them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import require

PLOT_VALUES = (
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
)
PLOT_TYPES = ("bar", "line", "scatter", "histogram")


def _per_day(
    session: Sandbox, time_min: str, time_max: str, value: Callable[[Mapping[str, str]], float]
) -> dict[str, list[float]]:
    days: dict[str, list[float]] = {}
    for visit in session.base.visits:
        day = visit["date_of_visit"]
        if (time_min and day < time_min) or (time_max and day > time_max):
            continue  # string comparison of ISO dates, as WorkBench does
        days.setdefault(day, []).append(value(visit))
    return dict(sorted(days.items()))


def analytics_get_visitor_information_by_id(session: Sandbox, visitor_id: str) -> list[dict]:
    """Returns the analytics data for a given visitor ID.

    Args:
        visitor_id: ID of the visitor
    """
    require(visitor_id, message="Visitor ID not provided.")
    visits = [
        {**visit, "user_engaged": visit["user_engaged"] == "True"}
        for visit in session.base.visits
        if visit["visitor_id"] == visitor_id
    ]
    if not visits:
        raise LookupError("Visitor not found.")
    return visits


def analytics_create_plot(
    session: Sandbox, time_min: str, time_max: str, value_to_plot: str, plot_type: str
) -> str:
    """Plots the analytics data for a given time range and value.

    Args:
        time_min: Start date of the time range. Date format is YYYY-MM-DD
        time_max: End date of the time range. Date format is YYYY-MM-DD
        value_to_plot: Value to plot. Available values are: 'total_visits',
            'session_duration_seconds', 'user_engaged', 'visits_direct', 'visits_referral',
            'visits_search_engine', 'visits_social_media'
        plot_type: Type of plot. Can be 'bar', 'line', 'scatter' or 'histogram'
    """
    require(time_min, message="Start date not provided.")
    require(time_max, message="End date not provided.")
    if value_to_plot not in PLOT_VALUES:
        raise ValueError("Value to plot must be one of " + ", ".join(f"'{v}'" for v in PLOT_VALUES))
    if plot_type not in PLOT_TYPES:
        raise ValueError("Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'")
    path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
    session.plots.append(path)
    return path


def analytics_total_visits_count(
    session: Sandbox, time_min: str = "", time_max: str = ""
) -> dict[str, int]:
    """Returns the total number of visits within a specified time range.

    Args:
        time_min: Start date of the time range. Date format is YYYY-MM-DD
        time_max: End date of the time range. Date format is YYYY-MM-DD
    """
    days = _per_day(session, time_min, time_max, lambda visit: 1)
    return {day: len(values) for day, values in days.items()}


def analytics_engaged_users_count(
    session: Sandbox, time_min: str = "", time_max: str = ""
) -> dict[str, int]:
    """Returns the number of engaged users within a specified time range.

    Args:
        time_min: Start date of the time range. Date format is YYYY-MM-DD
        time_max: End date of the time range. Date format is YYYY-MM-DD
    """
    days = _per_day(session, time_min, time_max, lambda visit: visit["user_engaged"] == "True")
    return {day: int(sum(values)) for day, values in days.items()}


def analytics_traffic_source_count(
    session: Sandbox, time_min: str = "", time_max: str = "", traffic_source: str = ""
) -> dict[str, int]:
    """Returns the number of visits from a specific traffic source within a specified time range.

    Args:
        time_min: Start date of the time range. Date format is YYYY-MM-DD
        time_max: End date of the time range. Date format is YYYY-MM-DD
        traffic_source: Traffic source to filter the visits. Available values are: 'direct',
            'referral', 'search engine', 'social media'
    """
    days = _per_day(
        session,
        time_min,
        time_max,
        lambda visit: not traffic_source or visit["traffic_source"] == traffic_source,
    )
    return {day: int(sum(values)) for day, values in days.items()}


def analytics_get_average_session_duration(
    session: Sandbox, time_min: str = "", time_max: str = ""
) -> dict[str, float]:
    """Returns the average session duration within a specified time range.

    Args:
        time_min: Start date of the time range. Date format is YYYY-MM-DD
        time_max: End date of the time range. Date format is YYYY-MM-DD
    """
    days = _per_day(
        session, time_min, time_max, lambda visit: float(visit["session_duration_seconds"])
    )
    return {day: sum(values) / len(values) for day, values in days.items()}


TOOLS = (
    analytics_get_visitor_information_by_id,
    analytics_create_plot,
    analytics_total_visits_count,
    analytics_engaged_users_count,
    analytics_traffic_source_count,
    analytics_get_average_session_duration,
)
ACTIONS = frozenset({"analytics_create_plot"})
