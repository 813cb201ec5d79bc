"""docs/protocol.md: Polling orders, List tags, A just-created order the source does not list
yet, Waiting poll: one look's decisions."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from shared.protocol.look import (
    answers_to_keep,
    look_degraded,
    source_lagging,
    stays_stale,
    tags_made_for,
)
from shared.wire import OrderKey

TAXI_1 = OrderKey("taxi", "o1")
EATS_1 = OrderKey("eats", "e1")


def stale(
    order: OrderKey,
    *,
    available: Collection[str] = ("taxi", "eats"),
    not_listed_yet: Collection[OrderKey] = (),
    behind: Collection[OrderKey] = (),
) -> bool:
    return stays_stale(order, available=available, not_listed_yet=not_listed_yet, behind=behind)


def test_a_known_order_of_an_unavailable_service_comes_back_stale():
    assert stale(TAXI_1, available={"eats"})
    assert not stale(EATS_1, available={"eats"})


def test_a_known_order_its_source_does_not_list_yet_stays_within_the_created_grace():
    assert stale(TAXI_1, not_listed_yet={TAXI_1})


def test_an_order_never_goes_backwards_it_comes_back_stale_with_the_echo():
    assert stale(TAXI_1, behind={TAXI_1})


def test_a_known_order_its_available_source_lists_is_not_stale():
    assert not stale(TAXI_1)


def keep(
    *,
    current: Collection[str] = ("taxi", "eats"),
    with_list_tags: Collection[str] = ("taxi", "eats"),
    shared: Collection[str] = (),
) -> set[str]:
    asked = {"taxi": "taxi answer", "eats": "eats answer", "grocery": None}
    kept = answers_to_keep(asked, current=current, with_list_tags=with_list_tags, shared=shared)
    return set(kept)


def test_a_current_answer_of_a_service_with_list_tags_is_kept():
    assert keep() == {"taxi", "eats"}


def test_a_lagging_source_s_answer_is_never_kept():
    assert keep(current={"eats"}) == {"eats"}


def test_a_source_that_does_not_bump_list_tags_is_asked_on_every_poll_its_answer_not_kept():
    assert keep(with_list_tags={"taxi"}) == {"taxi"}


def test_the_poll_that_made_a_coalesced_call_keeps_its_answer_the_others_do_not():
    assert keep(shared={"taxi"}) == {"eats"}


def test_an_unavailable_source_leaves_nothing_to_keep():
    assert "grocery" not in keep(current={"taxi", "eats", "grocery"})


def test_tags_are_made_only_for_orders_that_a_current_answer_lists():
    listed = [TAXI_1, EATS_1]
    assert tags_made_for(listed, current={"taxi"}) == {TAXI_1}
    # an order that only a kept or a lagging answer lists may have finished: no tags
    assert tags_made_for(listed, current=set()) == set()


def degraded(
    *,
    tag_store_up: bool = True,
    queried: Sequence[str] = ("taxi", "eats"),
    available: Collection[str] = ("taxi", "eats"),
    known_services: Sequence[str] = ("taxi",),
) -> bool:
    return look_degraded(
        tag_store_up=tag_store_up,
        queried=queried,
        served={"taxi", "eats"},
        available=available,
        known_services=known_services,
    )


def test_a_look_with_the_tag_store_and_every_queried_source_available_is_not_degraded():
    assert not degraded()


def test_the_tag_store_unavailable_degrades_the_poll():
    assert degraded(tag_store_up=False)


def test_a_queried_source_unavailable_degrades_the_poll():
    assert degraded(available={"taxi"})


def test_a_known_order_of_a_service_not_served_degrades_the_poll():
    # its stale answer must not make a waiting client poll again at once
    assert degraded(known_services=["taxi", "grocery"])


def test_a_supported_service_the_server_does_not_serve_degrades_nothing():
    assert not degraded(queried=["taxi", "eats", "grocery"])


def lagging(
    *,
    not_listed_yet: Collection[OrderKey] = (),
    behind: Collection[OrderKey] = (),
    answered: Sequence[str] = ("taxi",),
    current: Collection[str] = ("taxi",),
) -> bool:
    return source_lagging(
        not_listed_yet=not_listed_yet, behind=behind, answered=answered, current=current
    )


def test_current_answers_listing_every_known_order_do_not_lag():
    assert not lagging()


def test_a_just_created_order_its_source_does_not_list_yet_means_the_source_lags():
    assert lagging(not_listed_yet={TAXI_1})


def test_an_answer_of_older_data_than_the_list_tag_read_before_asking_lags():
    assert lagging(current=set())


def test_an_order_older_than_its_echo_means_the_source_lags():
    assert lagging(behind={TAXI_1})


def test_a_kept_answer_is_not_judged_by_the_list_tag_read_it_was_not_asked():
    assert not lagging(answered=[], current=set())
