"""Which policy version a client is answered by, and which it is told to hold
(docs/protocol.md: Policy changes).

A fleet mid-rollout has replicas on two policy files: the old one announcing the next version,
the new one making it current and the old one deprecated. A client that alternates between
them must settle on one version after at most one switch. So a version a replica serves as
current or announced is one a client keeps there; only a deprecated (or unknown) one is
replaced by the current. A client names the version it holds, and the one it was told when it
launches again, so a launch replica that only announces that version still hands it out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from shared.policy import PollingPolicy, Stage
from shared.protocol.tags import decode_tag


def version_of_client(
    stated: str | None,
    client_tags: Iterable[Mapping[str, str]],
    stages: Mapping[str, Stage],
    current: str,
) -> str:
    """The served version a client holds for a service: the one it states, when served;
    else the one its tags are of (an app that states none), the current first; else the
    current one (a client new to the service)."""
    if stated is not None and stated in stages:
        return stated
    found: str | None = None
    for tags in client_tags:
        for tag in tags.values():
            client_tag = decode_tag(tag)
            if client_tag is None or client_tag.policy_version not in stages:
                continue
            if client_tag.policy_version == current:
                return current
            found = found or client_tag.policy_version
    return found or current


def version_to_hold(client_version: str, stages: Mapping[str, Stage], current: str) -> str:
    """The version a client is told to hold (and launch hands out): its own while this
    server serves it as current or announced, so replicas on either file of a rollout agree
    with it; else (deprecated, unknown) the current one."""
    stage = stages.get(client_version)
    return client_version if stage is not None and stage.kept else current


def versions_of_client(
    policy: PollingPolicy,
    services: Sequence[str],
    stated: Mapping[str, str],
    client_tags: Iterable[tuple[str, Mapping[str, str]]],
) -> dict[str, str]:
    """version_of_client of each queried service the policy serves; `client_tags` are the
    (service, tags) of the client's known orders."""
    tags = list(client_tags)
    versions: dict[str, str] = {}
    for service in services:
        served = policy.services.get(service)
        if served is not None:
            versions[service] = version_of_client(
                stated.get(service),
                (order_tags for of, order_tags in tags if of == service),
                served.stages,
                served.policy_version,
            )
    return versions


def versions_to_hold(policy: PollingPolicy, client_versions: Mapping[str, str]) -> dict[str, str]:
    """version_to_hold of each service in `client_versions` (versions_of_client)."""
    return {
        service: version_to_hold(
            version, policy.services[service].stages, policy.services[service].policy_version
        )
        for service, version in client_versions.items()
    }


def versions_to_tell(to_hold: Mapping[str, str], named: Mapping[str, str]) -> dict[str, str]:
    """The `policy_versions` of an orders/state answer (docs/protocol.md: Policy changes):
    only the services whose version the client is to hold and did not name in its request,
    all of them when it named none. A client that holds the right versions is not sent them
    again on every poll; one told a version it does not hold launches again."""
    return {
        service: version for service, version in to_hold.items() if named.get(service) != version
    }
