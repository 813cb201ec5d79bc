"""The import graph, read from the code's own imports: the library depends on nothing of the
project, the products never depend on the developer tooling, and the reference client
depends on nothing of the server (it is what a mobile team would write)."""

from __future__ import annotations

import ast
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
