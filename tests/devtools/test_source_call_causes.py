"""The load test tells why each order source call was made from the list tag the BFF read
before asking (`at_least`, docs/protocol.md: What upstreams receive) against the same user's
previous call: a new tag is a changed list; the same tag again is a kept answer past its own
age limit (0.75 to 1 of `list_max_age`, docs/protocol.md: List tags) or, sooner, a kept
answer that was not there."""

from __future__ import annotations

from typing import Any

from devtools.loadtest.measure import SourceCallCauses, gap_summary


def stats(calls: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """The emulator's stats after these source calls (target, user, at_least), oldest first."""
    counts: dict[str, int] = {}
    recent: dict[str, list[dict[str, Any]]] = {}
    for target, user, tag in calls:
        counts[target] = counts.get(target, 0) + 1
        body = {"known_orders": []} if tag is None else {"known_orders": [], "at_least": tag}
        recent.setdefault(target, []).append({"headers": {"X-Yandex-UID": user}, "body": body})
    return {"calls": counts, "recent": recent}


def test_each_call_is_told_by_its_list_tag_and_the_time_since_the_last() -> None:
    causes = SourceCallCauses(list_max_age_s=120)
    calls: list[tuple[str, str, str | None]] = []

    def at(second: float, *new: tuple[str, str, str | None]) -> None:
        before = stats(calls)
        calls.extend(new)
        causes.read(before, stats(calls), second)

    # before counting: the launch's calls only set what each user's next call is told by
    at(0, ("source:taxi", "u1", "t1"), ("source:eats", "u1", "e1"))
    causes.counting = True
    at(10, ("source:taxi", "u1", "t2"))  # the list changed
    at(20, ("source:taxi", "u1", "t2"))  # the same tag again, soon: the kept answer was missing
    at(115, ("source:taxi", "u1", "t2"), ("source:eats", "u1", "e1"))  # past their age
    at(116, ("source:grocery", "u1", "g1"))  # no call of that source seen before
    at(117, ("source:eats", "u2", None))  # no list tag read (the tag store down)
    at(118, ("source:eats", "u1", None))
    # the tag store back: told by the last call with a tag, not by the one without
    at(119, ("source:eats", "u1", "e1"))

    assert causes.causes == {
        "list_changed": 1,
        "unchanged_early": 2,
        "past_max_age": 2,
        "first": 1,
        "no_list_tag": 2,
    }
    assert sorted(causes.past_max_age_gaps) == [95, 115]
    assert gap_summary(causes.past_max_age_gaps)["mean"] == 105


def test_calls_past_the_emulators_record_are_counted_unseen() -> None:
    causes = SourceCallCauses(list_max_age_s=120)
    causes.counting = True
    after = stats([("source:taxi", f"u{i}", "t") for i in range(3)])
    # the emulator keeps the last calls of each source only: here one of three
    after["recent"]["source:taxi"] = after["recent"]["source:taxi"][-1:]
    causes.read({"calls": {}}, after, 1)
    assert causes.causes == {"unseen": 2, "first": 1}
