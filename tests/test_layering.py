"""The import graph, read from the code's own imports: the library depends on nothing of the
project, the products never depend on the developer tooling, the reference client depends on
nothing of the server (it is what a mobile team would write), and no service imports another
(orders_state and launch share `services.bff`, which imports neither)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "services", "emulator", "client", "devtools", "benchmarks", "demo")

# package → the project's packages it must never import
FORBIDDEN = {
    "shared": {"services", "emulator", "client", "devtools", "benchmarks", "demo"},
    "services": {"emulator", "client", "devtools", "benchmarks", "demo"},
    "emulator": {"services", "client", "devtools", "benchmarks", "demo"},
    "client": {"shared", "services", "emulator", "devtools", "benchmarks", "demo"},
    # the demo page's server talks to the services over HTTP only, as a gateway would
    "demo": {"services", "emulator", "client", "devtools", "benchmarks"},
}


def project_imports(path: Path) -> set[str]:
    """The top-level project packages a module imports, lazily imported ones included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names} & set(PACKAGES)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_crosses_a_layer(package: str):
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"{package}/ has no modules"
    crossings = [
        f"{module.relative_to(ROOT)} imports {target}"
        for module in modules
        for target in sorted(project_imports(module) & FORBIDDEN[package])
    ]
    assert crossings == []


def test_the_checker_sees_a_crossing(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from devtools.stack import Stack\n    import client.client\n")
    assert project_imports(module) == {"devtools", "client"}


# service package → the service packages it may import (besides itself)
SERVICE_IMPORTS = {
    "bff": set(),
    "order_tags": set(),
    "orders_state": {"bff"},
    "launch": {"bff"},
}


def service_imports(path: Path) -> set[str]:
    """The packages under services/ a module imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[1] for name in names if name.startswith("services.")}
    return found


def test_every_service_package_is_listed():
    packages = {path.parent.name for path in (ROOT / "services").glob("*/__init__.py")}
    assert packages == set(SERVICE_IMPORTS)


@pytest.mark.parametrize("package", sorted(SERVICE_IMPORTS))
def test_no_service_imports_another(package: str):
    modules = sorted((ROOT / "services" / package).rglob("*.py"))
    crossings = [
        f"{module.relative_to(ROOT)} imports services.{target}"
        for module in modules
        for target in sorted(service_imports(module) - SERVICE_IMPORTS[package] - {package})
    ]
    assert crossings == []


def test_the_checker_sees_a_service_crossing(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("from services.orders_state.keys import X\nimport services.bff.wire\n")
    assert service_imports(module) == {"orders_state", "bff"}


def settings_imports(path: Path) -> set[str]:
    """The modules under services/ a module imports, by their dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name for name in names if name.startswith("services.")}
    return found


@pytest.mark.parametrize(
    "module", sorted((ROOT / "services").glob("*/config.py")), ids=lambda p: p.parent.name
)
def test_settings_sit_below_what_they_configure(module: Path):
    """A service's settings (services/*/config.py) import, of services/, only other
    settings: the core's config dataclasses carry their own defaults in shared/, and
    services/bff/resources.py (orders_state's waiting/setup.py) builds the objects, so the
    settings never import the engine they configure."""
    crossings = sorted(
        target
        for target in settings_imports(module)
        if not target.endswith(".config") or target.count(".") != 2
    )
    assert crossings == [], f"{module.relative_to(ROOT)} imports {crossings}"


def test_the_checker_sees_settings_importing_the_engine(tmp_path: Path):
    module = tmp_path / "config.py"
    module.write_text(
        "from services.bff.config import BffSettings\nfrom services.bff.engine import E\n"
    )
    assert settings_imports(module) == {"services.bff.config", "services.bff.engine"}


# the BFF's core: one look at sources and tags, the part machinery, the tag cache, parsing
# and admission; the HTTP clients they use are behind `services.bff.ports`
CORE = (
    "services.bff.engine",
    "services.bff.part_service",
    "services.bff.tag_cache",
    "services.bff.known_orders",
    "services.bff.ports",
    "services.bff.fetch_memo",
    "services.bff.field_cut",
    "services.bff.part_request",
    "services.bff.admission",
    "services.bff.poll",
    "services.bff.source_calls",
)


def test_the_core_imports_no_http_framework():
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; import {', '.join(CORE)}; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'aiohttp', 'aiohttp_retry'}))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.strip() == "[]"


def test_no_test_module_imports_another():
    """Shared helpers live in tests/helpers.py (and the other non-test modules of tests/),
    fixtures in the conftest files: a test module is never imported."""
    crossings = []
    for module in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_"):
                    crossings.append(f"{module.relative_to(ROOT)} imports {name}")
    assert crossings == []
