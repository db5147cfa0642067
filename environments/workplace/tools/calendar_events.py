"""Calendar tools (WorkBench ``calendar.*``): read, search, create, delete and update events.

Event ids are 8 digits; an event is a name, one participant, a start and a duration in minutes.
"""

from __future__ import annotations

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import contains, paginate, parse_time, require

TABLE = "calendar_events"
FIELDS = ("event_id", "event_name", "participant_email", "event_start", "duration")
UPDATABLE = FIELDS[1:]


def _check_id(event_id: str) -> None:
    require(event_id, message="Event ID not provided.")
    if not (len(event_id) == 8 and event_id.isdigit()):
        raise ValueError("Invalid event ID format. Expected 8-digit ID.")


def _check_value(field: str, value: str) -> None:
    if field == "event_start":
        parse_time(value, "event_start")
    elif field == "duration":
        try:
            minutes = int(value)
        except ValueError:
            raise ValueError("Invalid duration format. Expected a number of minutes.") from None
        if minutes <= 0:
            raise ValueError("Duration must be a positive number of minutes.")


def calendar_get_event_information_by_id(session: Sandbox, event_id: str, field: str) -> dict:
    """Returns the event for a given ID.

    Args:
        event_id: 8-digit ID of the event
        field: Field to return. Available fields are: 'event_id', 'event_name',
            'participant_email', 'event_start', 'duration'
    """
    _check_id(event_id)
    require(field, message="Field not provided.")
    if field not in FIELDS:
        raise ValueError(f"Invalid field. Available fields are: {', '.join(FIELDS)}")
    event = session.get(TABLE, event_id)
    if event is None:
        raise LookupError("Event not found.")
    return {field: event[field]}


def calendar_search_events(
    session: Sandbox,
    query: str = "",
    time_min: str = "",
    time_max: str = "",
    page: int = 1,
    page_size: int = 5,
) -> dict | str:
    """Returns the events for a given query with pagination support.

    Args:
        query: Query to search for. Terms will be matched in the event_name and
            participant_email fields
        time_min: Lower bound (inclusive) for an event's end time to filter by. Format:
            YYYY-MM-DD HH:MM:SS
        time_max: Upper bound (inclusive) for an event's start time to filter by. Format:
            YYYY-MM-DD HH:MM:SS
        page: Page number of results to return
        page_size: Number of events per page
    """
    # NeMo Gym filters both bounds on the start time, whatever the description says; so do we.
    low = parse_time(time_min, "time_min") if time_min else None
    high = parse_time(time_max, "time_max") if time_max else None
    found = []
    for event in session.rows(TABLE):
        if not (
            contains(event["event_name"], query) or contains(event["participant_email"], query)
        ):
            continue
        start = parse_time(event["event_start"], "event_start")
        if (low and start < low) or (high and start > high):
            continue
        found.append((start, dict(event)))
    if not found:
        return "No events found."
    found.sort(key=lambda pair: pair[0], reverse=True)
    return paginate([event for _, event in found], page, page_size, "events")


def calendar_create_event(
    session: Sandbox, event_name: str, participant_email: str, event_start: str, duration: str
) -> str:
    """Creates a new event.

    Args:
        event_name: Name of the event
        participant_email: Email of the participant
        event_start: Start time of the event. Format: YYYY-MM-DD HH:MM:SS
        duration: Duration of the event in minutes
    """
    require(event_name, message="Event name not provided.")
    require(participant_email, message="Participant email not provided.")
    require(event_start, message="Event start not provided.")
    require(duration, message="Event duration not provided.")
    _check_value("event_start", event_start)
    _check_value("duration", duration)
    row = {
        "event_name": event_name,
        "participant_email": participant_email.lower(),
        "event_start": event_start,
        "duration": duration,
    }
    return session.insert(TABLE, row)


def calendar_delete_event(session: Sandbox, event_id: str) -> str:
    """Deletes an event.

    Args:
        event_id: 8-digit ID of the event
    """
    _check_id(event_id)
    if session.get(TABLE, event_id) is None:
        raise LookupError("Event not found.")
    session.delete(TABLE, event_id)
    return "Event deleted successfully."


def calendar_update_event(session: Sandbox, event_id: str, field: str, new_value: str) -> str:
    """Updates an event.

    Args:
        event_id: 8-digit ID of the event
        field: Field to update. Available fields are: 'event_name', 'participant_email',
            'event_start', 'duration'
        new_value: New value for the field
    """
    require(event_id, field, new_value, message="Event ID, field, or new value not provided.")
    _check_id(event_id)
    if field not in UPDATABLE:
        raise ValueError(f"Invalid field. Available fields are: {', '.join(UPDATABLE)}")
    _check_value(field, new_value)
    if session.get(TABLE, event_id) is None:
        raise LookupError("Event not found.")
    if field == "participant_email":
        new_value = new_value.lower()
    session.update(TABLE, event_id, field, new_value)
    return "Event updated successfully."


TOOLS = (
    calendar_get_event_information_by_id,
    calendar_search_events,
    calendar_create_event,
    calendar_delete_event,
    calendar_update_event,
)
ACTIONS = frozenset({"calendar_create_event", "calendar_delete_event", "calendar_update_event"})
