"""Which policy version a client is answered by and told to hold, as docs/protocol.md (Policy
changes) words it, on the two files of a rollout: the old one announcing the next version
(A current, B announced) and the new one (B current, A deprecated)."""

from __future__ import annotations

from shared.policy import Stage
from shared.protocol.policy_versions import version_of_client, version_to_hold, versions_to_tell
from shared.protocol.tags import encode_tag

A, B, C = "aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"
NOW = 1_800_000_000_000
OLD_FILE = {A: Stage.CURRENT, B: Stage.ANNOUNCED}
NEW_FILE = {B: Stage.CURRENT, A: Stage.DEPRECATED}


def tags_of(version: str) -> dict[str, str]:
    return {"fast_info": encode_tag(version, "v1", NOW), "chat": encode_tag(version, "x", NOW)}


def test_a_client_is_answered_by_the_version_it_states_when_served():
    assert version_of_client(B, [tags_of(A)], OLD_FILE, A) == B
    assert version_of_client(A, [], NEW_FILE, B) == A


def test_a_stated_version_not_served_falls_back_to_the_tags_then_the_current():
    assert version_of_client(C, [tags_of(A)], NEW_FILE, B) == A
    assert version_of_client(C, [], NEW_FILE, B) == B


def test_a_client_stating_none_is_answered_by_the_version_of_its_tags_the_current_first():
    assert version_of_client(None, [tags_of(A)], NEW_FILE, B) == A
    assert version_of_client(None, [tags_of(A), tags_of(B)], NEW_FILE, B) == B
    assert version_of_client(None, [{"fast_info": "garbage"}, tags_of(C)], NEW_FILE, B) == B


def test_a_client_new_to_the_service_holds_the_current_version():
    assert version_of_client(None, [], OLD_FILE, A) == A


def test_a_version_served_as_current_or_announced_is_kept():
    # mid-rollout a client on B is told B by replicas on either file: no relaunch loop
    assert version_to_hold(B, OLD_FILE, A) == B
    assert version_to_hold(B, NEW_FILE, B) == B
    # and a client on A is told A by the old file's replicas
    assert version_to_hold(A, OLD_FILE, A) == A


def test_a_deprecated_or_unknown_version_is_replaced_by_the_current():
    # a client on A reaching a replica on the new file launches again, once, to B
    assert version_to_hold(A, NEW_FILE, B) == B
    assert version_to_hold(C, NEW_FILE, B) == B


def test_a_client_alternating_between_the_files_moves_at_most_once():
    """The client's rule (launch again, naming the version told, when told another one)
    against both files, in any order of replicas: it settles after one switch."""
    files = [(OLD_FILE, A), (NEW_FILE, B)]
    for first in (0, 1):
        stages, current = files[first]
        holds = version_to_hold(version_of_client(None, [], stages, current), stages, current)
        switches = 0
        for turn in range(8):
            stages, current = files[(first + turn) % 2]
            told = version_to_hold(version_of_client(holds, [], stages, current), stages, current)
            if told != holds:
                # a launch on the other file hands out the version told where it serves it
                other, other_current = files[(first + turn + 1) % 2]
                handed = version_of_client(told, [], other, other_current)
                holds = version_to_hold(handed, other, other_current)
                switches += 1
        assert holds == B
        assert switches <= 1


# An answer's policy_versions names only the services whose version the client is to hold and
# did not name in its request (all of them when it named none).


def test_a_client_that_holds_the_right_versions_is_not_sent_them_again():
    assert versions_to_tell({"taxi": A, "eats": B}, {"taxi": A, "eats": B}) == {}


def test_a_client_that_named_none_is_sent_every_version_to_hold():
    assert versions_to_tell({"taxi": A, "eats": B}, {}) == {"taxi": A, "eats": B}


def test_only_the_services_whose_version_the_client_did_not_name_are_sent():
    # eats: named another version (deprecated here); grocery: not named at all
    to_hold = {"taxi": A, "eats": B, "grocery": C}
    assert versions_to_tell(to_hold, {"taxi": A, "eats": A}) == {"eats": B, "grocery": C}


def test_a_named_service_the_answer_holds_nothing_of_is_not_sent():
    assert versions_to_tell({"taxi": A}, {"taxi": A, "lavka": B}) == {}
