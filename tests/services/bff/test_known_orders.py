"""supported_services as the poll considers it (services/bff/known_orders.py): what the app
can show, so an odd name is ignored, never bad input."""

from __future__ import annotations

from services.bff.known_orders import considered_services
from services.bff.wire import MAX_SUPPORTED_SERVICES


def test_a_malformed_name_is_ignored_and_counted():
    assert considered_services(["taxi", "etc...", "Eats", "", "eats"]) == (
        ["taxi", "eats"],
        {"malformed": 3},
    )


def test_only_the_first_names_are_considered():
    names = [f"s{i}" for i in range(MAX_SUPPORTED_SERVICES + 5)]
    kept, ignored = considered_services(names)
    assert kept == names[:MAX_SUPPORTED_SERVICES]
    assert ignored == {"past_limit": 5}


def test_no_list_considers_nothing():
    assert considered_services(None) == ([], {})
    assert considered_services([]) == ([], {})
