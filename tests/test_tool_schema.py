"""Tool schemas derived from signatures + Google docstrings, and strict argument validation."""

from __future__ import annotations

from typing import Literal

import pytest

from gymflow.env.tool_schema import tool_spec
from gymflow.environments.tool_call.tools import TOOLS, create_event, get_weather, set_timer


def book_flight(
    origin: str,
    seats: int,
    cabin: Literal["economy", "business"] = "economy",
    refundable: bool = False,
    budget: float | None = None,
) -> dict:
    """Book a flight for the team.

    Longer explanation that is not part of the summary.

    Args:
        origin: Three-letter airport code,
            for example "CDG".
        seats (int): Number of seats.
        cabin: Cabin class.
        refundable: Whether the ticket can be refunded.
        budget: Upper price limit.

    Returns:
        The booking, with a confirmation code.
    """
    return {}


class Calendar:
    def add(self, session: object, title: str) -> dict:
        """Add an entry.

        Args:
            title: Entry title.
        """
        return {"title": title, "state": session}


def params(fn) -> dict:
    return tool_spec(fn).schema["function"]["parameters"]


def test_openai_function_shape():
    schema = tool_spec(book_flight).schema
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "book_flight"
    assert schema["function"]["description"] == "Book a flight for the team."
    p = schema["function"]["parameters"]
    assert p["type"] == "object"
    assert p["additionalProperties"] is False
    assert "title" not in p
    assert all("title" not in prop for prop in p["properties"].values())


def test_types_from_the_signature():
    props = params(book_flight)["properties"]
    assert props["origin"]["type"] == "string"
    assert props["seats"]["type"] == "integer"
    assert props["refundable"]["type"] == "boolean"
    assert {"type": "number"} in props["budget"]["anyOf"]


def test_literal_becomes_enum_with_its_default():
    cabin = params(book_flight)["properties"]["cabin"]
    assert cabin["enum"] == ["economy", "business"]
    assert cabin["type"] == "string"
    assert cabin["default"] == "economy"
    day = params(create_event)["properties"]["day"]
    assert day["enum"][0] == "monday" and len(day["enum"]) == 7


def test_only_arguments_without_defaults_are_required():
    assert params(book_flight)["required"] == ["origin", "seats"]
    assert params(get_weather)["required"] == ["city"]


def test_descriptions_come_from_the_docstring():
    props = params(book_flight)["properties"]
    # a description continued on a deeper-indented line is kept whole
    assert props["origin"]["description"] == 'Three-letter airport code, for example "CDG".'
    # "(int)" after the name is a type annotation, not part of the description
    assert props["seats"]["description"] == "Number of seats."
    assert props["cabin"]["description"] == "Cabin class."
    assert props["budget"]["description"] == "Upper price limit."
    # the Returns section is not an argument
    assert "The" not in props and "Returns" not in props


def test_summary_stops_at_a_section_header_without_a_blank_line():
    def ping(host: str) -> str:
        """Ping a host.
        Args:
            host: Host name.
        """
        return host

    spec = tool_spec(ping)
    assert spec.schema["function"]["description"] == "Ping a host."
    assert (
        spec.schema["function"]["parameters"]["properties"]["host"]["description"] == "Host name."
    )


def test_no_docstring_gives_empty_description():
    def bare(x: int) -> int:
        return x

    schema = tool_spec(bare).schema
    assert schema["function"]["description"] == ""
    assert "description" not in schema["function"]["parameters"]["properties"]["x"]


def test_no_arguments_has_an_empty_required_list():
    def now() -> str:
        """The time."""
        return ""

    p = params(now)
    assert p["required"] == [] and p["properties"] == {}
    assert tool_spec(now).validate({}) == {}


def test_self_and_session_are_not_arguments():
    spec = tool_spec(Calendar().add)
    p = spec.schema["function"]["parameters"]
    assert list(p["properties"]) == ["title"]
    assert p["required"] == ["title"]
    assert spec.name == "add"


def test_missing_type_hint_is_refused():
    def untyped(x, y: int) -> int:
        return y

    with pytest.raises(TypeError, match="'x' has no type hint"):
        tool_spec(untyped)


def test_validate_fills_defaults():
    spec = tool_spec(book_flight)
    assert spec.validate({"origin": "CDG", "seats": 2}) == {
        "origin": "CDG",
        "seats": 2,
        "cabin": "economy",
        "refundable": False,
        "budget": None,
    }
    assert tool_spec(get_weather).validate({"city": "Oslo"}) == {"city": "Oslo", "unit": "celsius"}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"minutes": "5"}, "minutes"),  # a string is not an int
        ({"minutes": 5.0}, "minutes"),  # nor is a float
        ({"minutes": True}, "minutes"),  # nor is a bool
        ({"minutes": None}, "minutes"),
        ({"minutes": [5]}, "minutes"),
        ({}, "minutes"),  # required
        ({"minutes": 5, "force": True}, "force"),  # unknown arguments are refused
    ],
)
def test_strict_validation_names_the_argument(arguments, named):
    with pytest.raises(ValueError) as info:
        tool_spec(set_timer).validate(arguments)
    assert str(info.value).startswith(f"{named}: ")


def test_literal_outside_the_enum_is_refused():
    with pytest.raises(ValueError, match="^unit: "):
        tool_spec(get_weather).validate({"city": "Oslo", "unit": "kelvin"})


def test_every_problem_is_reported():
    with pytest.raises(ValueError) as info:
        tool_spec(create_event).validate({"title": 1, "day": "someday", "extra": 0})
    message = str(info.value)
    for name in ("title", "day", "hour", "extra"):
        assert f"{name}: " in message
    assert message.count("; ") == 3


def test_arguments_that_are_not_an_object_are_refused():
    with pytest.raises(ValueError, match=r"^\(root\): "):
        tool_spec(set_timer).validate([5])  # type: ignore[arg-type]


def test_validation_does_not_change_its_input():
    arguments = {"city": "Oslo"}
    tool_spec(get_weather).validate(arguments)
    assert arguments == {"city": "Oslo"}


def test_environment_tools_all_have_schemas():
    names = [tool_spec(fn).name for fn in TOOLS]
    assert names == [fn.__name__ for fn in TOOLS]
    for fn in TOOLS:
        fn_schema = tool_spec(fn).schema["function"]
        assert fn_schema["description"]
        assert all(
            prop.get("description") for prop in fn_schema["parameters"]["properties"].values()
        )
