"""compose.yaml matches the code: every stack service runs its module with variables it reads.

Docker is not available here, so the file is checked against the settings classes instead."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from devtools.stack import STACK
from tests.apps import SETTINGS_CLASSES

ROOT = Path(__file__).resolve().parents[2]
COMMON_ENV = {"LOG_LEVEL", "LOG_JSON"}


def env_names(settings_class: type[BaseSettings]) -> set[str]:
    """Every environment variable a settings class reads, nested settings included."""
    prefix = settings_class.model_config.get("env_prefix", "")
    names: set[str] = set()
    for name, field in settings_class.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
            names |= env_names(annotation)
            continue
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c for c in alias.choices if isinstance(c, str) and c.isupper()}
        elif isinstance(alias, str):
            names.add(alias)
        names.add(f"{prefix}{name}".upper())
    return names


def test_compose_runs_every_stack_service_with_known_variables() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert services["redis"]["image"].startswith("redis")
    for stack_service in STACK:
        assert stack_service.name in services, f"{stack_service.name} missing from compose.yaml"
        spec = services[stack_service.name]
        assert spec["command"] == ["python", "-m", stack_service.module]
        assert (ROOT / stack_service.module.replace(".", "/") / "__main__.py").exists()
        known = env_names(SETTINGS_CLASSES[stack_service.name]) | COMMON_ENV
        unknown = set(spec["environment"]) - known
        assert not unknown, f"{stack_service.name}: variables the code does not read: {unknown}"
        port = spec["environment"][stack_service.port_env]
        assert spec["ports"] == [f"{port}:{port}"]
        for name, value in spec["environment"].items():
            if name.endswith("_URL") and "://" in value and "redis" not in value:
                host = value.split("://", 1)[1].split(":", 1)[0]
                assert host in services, f"{stack_service.name}: {name} points at unknown {host}"


def test_dockerfile_installs_every_package_and_finds_the_policy() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("shared", "services", "emulator", "client", "demo", "policy"):
        assert f"COPY {package} ./{package}" in dockerfile
    # a non-editable install cannot find policy/ beside its package: the image says where
    assert "MLUTP_POLICY_PATH=/app/policy/polling_policy.yaml" in dockerfile
    assert "WORKDIR /app" in dockerfile
    assert (ROOT / "policy" / "polling_policy.yaml").exists()
