"""The product carries nothing for its tools: the developer tooling (devtools/) watches the
services through the ports they take at construction (services/bff/observer.py,
services/orders_state/waiting/ports.py) and subclasses no product class, nor imports a private
name of it; and no method or attribute of a product class is used only by devtools/ or the
tests. Read from the code, as tests/test_layering.py reads its imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("services", "shared")
# the repository's other users of the product (the emulator plays the order core and the
# feature services, the demo and the benchmarks drive the stack): their use counts
USERS = ("emulator", "demo", "benchmarks")
TOOLS = ("devtools", "tests")


def modules(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (ROOT / package).rglob("*.py"))


def product_module(name: str) -> bool:
    return name.split(".")[0] in PRODUCT


def tool_crossings(path: Path) -> list[str]:
    """A tool's module: the private product names it imports and the product classes it
    subclasses (by the names it imported them under)."""
    tree = ast.parse(path.read_text(), str(path))
    imported: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not product_module(node.module):
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"imports {node.module}.{alias.name}")
                imported.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in imported:
                    found.append(f"{node.name} subclasses {base.id}")
    return found


def test_the_tooling_subclasses_no_product_class_and_imports_nothing_private() -> None:
    crossings = [
        f"{path.relative_to(ROOT)}: {crossing}"
        for path in modules("devtools")
        for crossing in tool_crossings(path)
    ]
    assert crossings == []


def test_the_checker_sees_a_subclass_and_a_private_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from services.orders_state.waiting.polls import WaitingPolls, _Wait\n"
        "from typing import Protocol\n"
        "class Checked(WaitingPolls): ...\n"
        "class Port(Protocol): ...\n"
    )
    assert tool_crossings(module) == [
        "imports services.orders_state.waiting.polls._Wait",
        "Checked subclasses WaitingPolls",
    ]


def members(path: Path) -> dict[str, str]:
    """The public methods and attributes a module's classes define: name → class."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                found.setdefault(item.target.id, node.name)
            elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(item.name, node.name)
                for sub in ast.walk(item):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id == "self"
                    ):
                        found.setdefault(sub.attr, node.name)
    return {name: owner for name, owner in found.items() if not name.startswith("_")}


def names_used(path: Path) -> set[str]:
    """Every name a module reads: attributes (not those it assigns on self), names, keyword
    arguments and strings (getattr, settings by name): by name alone, so a member counts as
    used wherever any object's member of that name is."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute):
            assigned_on_self = (
                isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            )
            if not assigned_on_self:
                used.add(node.attr)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.keyword) and node.arg:
            used.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)
    return used


def only_tools_use(
    defined: dict[str, str], used_by_product: set[str], used_by_tools: set[str]
) -> list[str]:
    return sorted(
        f"{owner}.{name}"
        for name, owner in defined.items()
        if name in used_by_tools and name not in used_by_product
    )


def test_no_product_member_is_used_only_by_the_tooling_or_the_tests() -> None:
    defined = {
        name: f"{path.relative_to(ROOT)}: {owner}"
        for path in modules(*PRODUCT)
        for name, owner in members(path).items()
    }
    by_product = set().union(*map(names_used, modules(*PRODUCT, *USERS)))
    by_tools = set().union(*map(names_used, modules(*TOOLS)))
    assert only_tools_use(defined, by_product, by_tools) == []


def test_the_checker_sees_a_member_only_a_tool_uses(tmp_path: Path) -> None:
    product = tmp_path / "engine.py"
    product.write_text(
        "class Engine:\n"
        "    def __init__(self):\n        self.hooked = None\n        self.rng = 1\n"
        "    def look(self):\n        return self.rng\n"
        "    def held_from(self):\n        ...\n"
    )
    tool = tmp_path / "observed.py"
    tool.write_text("def f(engine):\n    engine.hooked = 1\n    engine.held_from()\n")
    assert only_tools_use(members(product), names_used(product), names_used(tool)) == [
        "Engine.held_from",
        "Engine.hooked",
    ]
