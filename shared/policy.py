"""The polling policy: which part endpoint serves which top-level fields of which service.

Loaded from a YAML or JSON file and validated at start-up; a bad file stops the service with
a message naming the bad field. The policy version of a service is a short hash of what gives
its parts their meaning, embedded in every tag, so changing a service's parts invalidates only
that service's tags. Besides its current version a service may list versions it serves without
handing them out: `announced` ones (the next, during a rollout) and `deprecated` ones (the
previous, while old clients still use them); see docs/protocol.md, Policy changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

import msgspec
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from shared.errors import StartupError
from shared.wire import MAX_PARTS

DEFAULT_POLICY_PATH = Path(__file__).resolve().parent.parent / "policy" / "polling_policy.yaml"

Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
FieldName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Status = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Url = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_./-]*$", max_length=200)]


class PollingType(StrEnum):
    TAG_DEFINED = "tag_defined"
    ROUTE_DISTANCE_DEPENDED = "route_distance_depended"


class PolicyError(StartupError):
    """The policy file is unreadable or invalid; the message names the place."""


class PartRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    part_name: Name
    url: Url
    fields: tuple[FieldName, ...] = Field(min_length=1)
    polling_type: PollingType
    part_type: Name
    priority: int = Field(ge=0)
    required: bool = False
    static: bool = False
    # the upstream the server fetches the part from, when not its part type's: the server's
    # own routing, so clients never see it and it is no part of the policy version
    upstream: Name | None = None

    @property
    def tag_defined(self) -> bool:
        return self.polling_type is PollingType.TAG_DEFINED

    @property
    def upstream_name(self) -> str:
        """Which upstream serves the part: its own, or its part type's."""
        return self.upstream or self.part_type


# what of a rule only the server uses: never handed out, never in the version
SERVER_ONLY = {"upstream"}
# what of a rule the policy version covers: what a part means (its name, fields and part type)
# and where and how a client gets it (its url, its polling type), for a client holding the old
# ones must be told. Priority, `required` and `static` only order and pace the fetches: a new
# value reaches clients at their next launch and invalidates no tag.
VERSIONED = {"part_name", "fields", "part_type", "url", "polling_type"}


class Stage(StrEnum):
    """Where a served policy version is in its life (docs/protocol.md: Policy changes)."""

    # handed out by launch
    CURRENT = "current"
    # served (its endpoints and tags), handed out only to a client already told it: the next
    # version, while a rollout puts it on every replica
    ANNOUNCED = "announced"
    # served to the clients still holding it, who are told to launch again
    DEPRECATED = "deprecated"

    @property
    def kept(self) -> bool:
        """A client holding a version of this stage keeps it."""
        return self is not Stage.DEPRECATED


def _check_rules(rules: tuple[PartRule, ...]) -> None:
    names: set[str] = set()
    owner: dict[str, str] = {}
    for rule in rules:
        if rule.part_name in names:
            raise ValueError(f"part_name {rule.part_name!r} is used twice")
        names.add(rule.part_name)
        for name in rule.fields:
            if name in owner:
                raise ValueError(
                    f"field {name!r} is in both {owner[name]!r} and {rule.part_name!r}: "
                    "parts of one service must not share a top-level field"
                )
            owner[name] = rule.part_name


def rules_version(rules: tuple[PartRule, ...]) -> str:
    """A short, URL-safe hash of what the version covers of a service's rules (VERSIONED),
    independent of their order in the file."""
    canonical = json.dumps(
        sorted(
            (rule.model_dump(mode="json", include=VERSIONED) for rule in rules),
            key=lambda r: r["part_name"],
        ),
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


class ServedRules(BaseModel):
    """A policy version served besides the current one: announced (the next) or deprecated
    (an older one). `version`, when given, must be its rules' hash: the file says which
    version it serves, and a slip in its rules is caught at start-up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str | None = None
    rules: tuple[PartRule, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _valid(self) -> ServedRules:
        _check_rules(self.rules)
        computed = rules_version(self.rules)
        if self.version is not None and self.version != computed:
            raise ValueError(
                f"version {self.version!r} does not match its rules' hash {computed!r}"
            )
        return self

    @property
    def policy_version(self) -> str:
        return rules_version(self.rules)


class ServicePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[PartRule, ...] = Field(min_length=1)
    # served, not handed out: the next version, while a rollout reaches every replica
    announced: tuple[ServedRules, ...] = ()
    # served, not handed out: older versions, while old clients still use them
    deprecated: tuple[ServedRules, ...] = ()
    # status → base polling interval; statuses not listed get the configured default. Not part
    # of the policy version: tuning an interval invalidates no client tag.
    interval_bases_ms: dict[Status, Annotated[int, Field(gt=0, le=3_600_000)]] = {}
    # the kinds of change a user may make to an order of this service (what a stale order
    # says is not allowed). Not part of the policy version either.
    change_capabilities: tuple[Name, ...] = ()
    # the service's order source bumps the user's list tag on every change of what it lists
    # (docs/protocol.md: List tags): its answer is kept under that tag, and a poll that finds
    # the tag unchanged does not ask the source. Not part of the policy version.
    list_tags: bool = False

    @model_validator(mode="after")
    def _valid(self) -> ServicePolicy:
        _check_rules(self.rules)
        seen = {rules_version(self.rules): "the current version"}
        for stage, served in (("announced", self.announced), ("deprecated", self.deprecated)):
            for index, other in enumerate(served):
                version = other.policy_version
                if version in seen:
                    raise ValueError(
                        f"{stage}.{index} (version {version}) has the same rules as {seen[version]}"
                    )
                seen[version] = f"{stage}.{index}"
        if len(self.tagged_parts) > MAX_PARTS:
            raise ValueError(
                f"its versions together have {len(self.tagged_parts)} tagged parts "
                f"({', '.join(self.tagged_parts)}); an order's tags hold at most {MAX_PARTS}: "
                "drop a deprecated version"
            )
        return self

    @cached_property
    def policy_version(self) -> str:
        return rules_version(self.rules)

    @cached_property
    def rules_by_priority(self) -> tuple[PartRule, ...]:
        return _by_priority(self.rules)

    @cached_property
    def stages(self) -> dict[str, Stage]:
        """Every served policy version → its stage."""
        stages = {self.policy_version: Stage.CURRENT}
        stages |= {other.policy_version: Stage.ANNOUNCED for other in self.announced}
        stages |= {other.policy_version: Stage.DEPRECATED for other in self.deprecated}
        return stages

    @cached_property
    def versions(self) -> dict[str, tuple[PartRule, ...]]:
        """Every served policy version → its rules by ascending priority."""
        versions = {self.policy_version: self.rules_by_priority}
        for other in (*self.announced, *self.deprecated):
            versions[other.policy_version] = _by_priority(other.rules)
        return versions

    @cached_property
    def tagged_parts(self) -> tuple[str, ...]:
        """The parts with content tags of their own: every tag_defined, non-static part of
        every served version (a name several versions share is one part). Each version's
        part reads its own name's tag, so replicas mid-rollout, whichever version is current
        on them, read the same content for it."""
        return tuple(
            sorted(
                {
                    rule.part_name
                    for rules in self.versions.values()
                    for rule in rules
                    if rule.tag_defined and not rule.static
                }
            )
        )

    def parts_holding(self, fields: Iterable[str]) -> list[str]:
        """What a feature service bumps after changing these fields (data first, tag second):
        every tagged part of every served version that holds any of them. A name two versions
        give different fields is bumped for either's: a spare refetch, never a lost update."""
        changed = set(fields)
        return sorted(
            {
                rule.part_name
                for rules in self.versions.values()
                for rule in rules
                if rule.tag_defined and not rule.static and changed.intersection(rule.fields)
            }
        )


def _by_priority(rules: Iterable[PartRule]) -> tuple[PartRule, ...]:
    return tuple(sorted(rules, key=lambda rule: (rule.priority, rule.part_name)))


class PartEndpoint(BaseModel):
    """One servable part URL: the rule, its service and the policy version it belongs to."""

    model_config = ConfigDict(frozen=True)

    service: str
    policy_version: str
    stage: Stage
    rule: PartRule


class PollingPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    services: dict[Name, ServicePolicy] = Field(min_length=1)

    @model_validator(mode="after")
    def _urls_unique(self) -> PollingPolicy:
        seen: dict[str, str] = {}
        for endpoint in self._all_endpoints():
            where = f"{endpoint.service} {endpoint.policy_version} {endpoint.rule.part_name}"
            if endpoint.rule.url in seen:
                raise ValueError(
                    f"url {endpoint.rule.url!r} is used by {seen[endpoint.rule.url]} and {where}"
                )
            seen[endpoint.rule.url] = where
        return self

    @cached_property
    def launch_rules(self) -> dict[tuple[str, str], list[msgspec.Raw]]:
        """(service, policy version) → its rules by priority as launch hands them out
        (`polling_policy`: each rule with its service, defaults left out), encoded once; for
        every version launch may hand out (current and announced)."""
        return {
            (service, version): [
                msgspec.Raw(
                    msgspec.json.encode(
                        {
                            "service": service,
                            **rule.model_dump(
                                mode="json", exclude_defaults=True, exclude=SERVER_ONLY
                            ),
                        }
                    )
                )
                for rule in policy.versions[version]
            ]
            for service, policy in self.services.items()
            for version, stage in policy.stages.items()
            if stage.kept
        }

    def _all_endpoints(self) -> list[PartEndpoint]:
        return [
            PartEndpoint(
                service=service,
                policy_version=version,
                stage=policy.stages[version],
                rule=rule,
            )
            for service, policy in self.services.items()
            for version, rules in policy.versions.items()
            for rule in rules
        ]

    @cached_property
    def endpoints(self) -> tuple[PartEndpoint, ...]:
        """Every part endpoint to serve, of every served version."""
        return tuple(self._all_endpoints())

    def version(self, service: str) -> str:
        return self.services[service].policy_version

    def interval_bases_ms(self) -> dict[str, int]:
        """ "<service>:<status>" → the base polling interval of that status."""
        return {
            f"{service}:{status}": base
            for service, policy in self.services.items()
            for status, base in policy.interval_bases_ms.items()
        }


def _format_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        place = ".".join(str(part) for part in error["loc"]) or "(top level)"
        lines.append(f"  {place}: {error['msg']}")
    return "\n".join(lines)


def parse_policy(data: Any, source: str = "<policy>") -> PollingPolicy:
    try:
        return PollingPolicy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(f"invalid polling policy {source}:\n{_format_error(exc)}") from None


def load_policy(path: Path | str = DEFAULT_POLICY_PATH) -> PollingPolicy:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read polling policy {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        # both name the line and column of the syntax error
        raise PolicyError(f"polling policy {path} is not valid YAML/JSON: {exc}") from None
    return parse_policy(data, str(path))
