"""deploy/k8s (issue 14): every manifest is valid against the Kubernetes schemas (offline,
kubernetes-validate), and says what the services need: readiness on /ping, a preStop drain,
a termination grace past the longest poll plus the in-flight deadline, the token from a
Secret, variables the code reads, selectors that match, an HPA for orders_state."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from devtools.stack import STACK
from services.bff.config import ProtocolSettings
from shared.config import SHUTDOWN_TIMEOUT_S
from shared.protocol.waiting import longest_poll_s
from tests.apps import SETTINGS_CLASSES, all_apps
from tests.helpers import env_names

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.37.0"
# kinds of the Prometheus Operator: no schema ships with Kubernetes, checked by hand below
OPERATOR_KINDS = {"ServiceMonitor"}
BY_MODULE = {service.module: service for service in STACK}
PROTOCOL = ProtocolSettings()


def documents(path: Path) -> Iterator[dict[str, Any]]:
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            yield document


def base() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    found = [d for name in kustomization["resources"] for d in documents(K8S / "base" / name)]
    # the generated ConfigMaps, as kustomize makes them (names without the hash suffix)
    for generator in kustomization["configMapGenerator"]:
        data = dict(literal.split("=", 1) for literal in generator["literals"])
        found.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": generator["name"]}}
            | {"data": data}
        )
    return found


def render(overlay: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(
            "kubectl is not installed: the overlay cannot be rendered (.ci/run installs it)"
        )
    rendered = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
    )
    assert rendered.returncode == 0, rendered.stderr
    return [d for d in yaml.safe_load_all(rendered.stdout) if d]


def named(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def config_map(resources: list[dict[str, Any]], name: str) -> dict[str, str]:
    """A ConfigMap by its generator's name (kustomize adds a hash suffix to the real one)."""
    [found] = [
        r["data"]
        for r in resources
        if r["kind"] == "ConfigMap"
        and (r["metadata"]["name"] == name or r["metadata"]["name"].startswith(f"{name}-"))
    ]
    data: dict[str, str] = found
    return data


def validate_all(resources: list[dict[str, Any]]) -> None:
    for resource in resources:
        where = f"{resource['kind']} {resource['metadata']['name']}"
        if resource["kind"] in OPERATOR_KINDS:
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
            continue
        try:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{where}: {exc.message} at {list(exc.path)}") from exc


def test_every_base_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    resources = base()
    validate_all(resources)
    assert {r["kind"] for r in resources} >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "ConfigMap",
    }


def test_the_production_overlay_renders_to_valid_manifests_of_its_namespace_and_image() -> None:
    resources = render(K8S / "overlays" / "production")
    validate_all(resources)
    for resource in resources:
        assert resource["metadata"]["namespace"] == "mlutp", resource["metadata"]["name"]
    for deployment in named(resources, "Deployment").values():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"].startswith("registry.example.com/mlutp:")
        # envFrom names the generated ConfigMaps by their hashed names: a change rolls pods
        for source in container.get("envFrom", []):
            name = source["configMapRef"]["name"]
            assert name in named(resources, "ConfigMap"), name
    # every upstream points somewhere real in production (the base's are .invalid)
    for name, value in config_map(resources, "mlutp-upstreams").items():
        assert ".invalid" not in value, name


def deployments() -> dict[str, dict[str, Any]]:
    return named(base(), "Deployment")


@pytest.mark.parametrize("name", ["order-tags", "orders-state", "launch"])
def test_each_deployment_runs_its_module_with_variables_it_reads(name: str) -> None:
    resources = base()
    pod = deployments()[name]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"][:2] == ["python", "-m"]
    stack_service = BY_MODULE[container["command"][2]]
    known = env_names(SETTINGS_CLASSES[stack_service.name])
    variables = {e["name"]: e for e in container["env"]}
    for source in container.get("envFrom", []):
        variables |= dict.fromkeys(config_map(resources, source["configMapRef"]["name"]))
    unknown = set(variables) - known
    assert not unknown, f"{name}: variables the code does not read: {unknown}"
    # the token from a Secret, never written in a manifest
    token = variables["MLUTP_SERVICE_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"] == {"name": "mlutp-service-token", "key": "token"}
    # it listens where the probes and the Service look
    [port] = container["ports"]
    assert int(variables[stack_service.port_env]["value"]) == port["containerPort"]
    assert variables[stack_service.port_env.replace("_PORT", "_HOST")]["value"] == "0.0.0.0"
    assert container["readinessProbe"]["httpGet"] == {"path": "/ping", "port": port["name"]}
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]


@pytest.mark.parametrize("name", ["order-tags", "orders-state", "launch"])
def test_a_pod_drains_before_sigterm_and_gets_time_to_finish(name: str) -> None:
    pod = deployments()[name]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    drain_s = float(command[1])
    needed_s = drain_s + SHUTDOWN_TIMEOUT_S
    if name == "orders-state":
        # a poll held when SIGTERM comes is answered at once, but one that began just before
        # the drain ended may run its whole course: the longest wait and its looks
        needed_s += longest_poll_s(PROTOCOL.source_deadline_s, PROTOCOL.tags_deadline_s)
    assert pod["terminationGracePeriodSeconds"] > needed_s


def test_services_budgets_and_the_autoscaler_select_the_pods_they_mean() -> None:
    resources = base()
    pods = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments().items()}
    for name, deployment in deployments().items():
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pods[name].items()
        service = named(resources, "Service")[name]
        assert service["spec"]["selector"].items() <= pods[name].items()
        [port] = service["spec"]["ports"]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert port["targetPort"] == container["ports"][0]["name"] == port["name"]
        budget = named(resources, "PodDisruptionBudget")[name]
        assert budget["spec"]["selector"]["matchLabels"].items() <= pods[name].items()
    autoscalers = named(resources, "HorizontalPodAutoscaler")
    assert "orders-state" in autoscalers
    for name, autoscaler in autoscalers.items():
        assert autoscaler["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
        }
        # the autoscaler owns the count: a replicas field would fight it on every apply
        assert "replicas" not in deployments()[name]["spec"]
        assert autoscaler["spec"]["minReplicas"] <= autoscaler["spec"]["maxReplicas"]


def test_the_service_monitor_scrapes_metrics_of_every_service() -> None:
    resources = base()
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    common = {k: v for entry in kustomization["labels"] for k, v in entry["pairs"].items()}
    [monitor] = named(resources, "ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    # kustomize puts the common labels on every Service: the monitor selects them all
    assert monitor["spec"]["selector"]["matchLabels"].items() <= common.items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    for service in named(resources, "Service").values():
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def ingress_backend(ingress: dict[str, Any], path: str) -> str | None:
    """The Service an Ingress sends a request path to (Exact first, then the longest
    Prefix, element by element, as Kubernetes matches), or None."""
    best: tuple[int, str] | None = None
    for rule in ingress["spec"]["rules"]:
        for entry in rule["http"]["paths"]:
            wanted = entry["path"]
            service: str = entry["backend"]["service"]["name"]
            if entry["pathType"] == "Exact":
                if path == wanted:
                    return service
                continue
            assert entry["pathType"] == "Prefix", entry
            prefix = wanted.rstrip("/")
            if (path == prefix or path.startswith(f"{prefix}/")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), service)
    return best[1] if best else None


def test_the_ingress_routes_every_client_facing_endpoint_by_the_user_and_nothing_else() -> None:
    """docs/protocol.md: A fleet — routing by user: consistent hashing of X-Yandex-UID, so
    one user's polls and part requests meet in one pod (ingress-nginx's upstream-hash-by)."""
    resources = base()
    [ingress] = named(resources, "Ingress").values()
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == "$http_x_yandex_uid"
    # pods, not the Service's address: kube-proxy would spray what the hash placed
    assert annotations.get("nginx.ingress.kubernetes.io/service-upstream", "false") == "false"
    # a waiting poll is answered before the Ingress gives up on it
    read_timeout_s = int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"])
    assert read_timeout_s > longest_poll_s(PROTOCOL.source_deadline_s, PROTOCOL.tags_deadline_s)
    services = named(resources, "Service")
    kube_names = {"orders_state": "orders-state", "launch": "launch"}
    for app_name, app in all_apps():
        if app_name not in kube_names:
            continue
        for route in app.router.routes():
            path = route.resource.canonical if route.resource else ""
            where = ingress_backend(ingress, path)
            if route.method == "POST":
                # every endpoint the apps call: launch, orders/state, parts, routes, totw
                assert where == kube_names[app_name], path
            else:
                # /ping, /metrics: for the cluster, not the internet
                assert where is None, path
    for rule in ingress["spec"]["rules"]:
        for entry in rule["http"]["paths"]:
            backend = entry["backend"]["service"]
            assert backend["port"]["name"] in {
                p["name"] for p in services[backend["name"]]["spec"]["ports"]
            }
    # by the user's header, never by the client's address (NAT: one address, many users)
    for name, service in services.items():
        assert service["spec"].get("sessionAffinity", "None") == "None", name
