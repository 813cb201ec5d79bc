"""openapi/client.yaml as the app teams' generator reads it: openapi-generator (the jar the PyPI
package openapi-generator-cli carries; Java 17) makes Kotlin, Swift and TypeScript clients of it
without an error, each model a named schema; the TypeScript one compiles with tsc (pinned in
ts/package.json) and, from Node, launches and polls against a stack of real processes (a 200,
then a 204 for its answer_tag, which the generated client takes as success), the user in the
header of the spec's apiKey scheme, set once in its Configuration.
Without java (or npm, for the TypeScript run) the tests skip and say so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from shared.policy import load_policy
from tests.conftest import SUMMARY_LINES
from tests.generated.conftest import OPENAPI, once_per_run, schema_names
from tests.stack_process import StackProcess

TS = Path(__file__).resolve().parent / "ts"
POLICY = load_policy()

# generator → its options and where it writes its models. Kotlin: the options under which
# oneOf is a sealed interface read by its discriminator (the default library, okhttp4 with
# moshi, merges a oneOf's branches into one class)
GENERATORS: dict[str, tuple[list[str], str]] = {
    "kotlin": (
        [
            "--library",
            "jvm-retrofit2",
            "--additional-properties",
            "serializationLibrary=kotlinx_serialization,generateOneOfAnyOfWrappers=true",
        ],
        "src/main/kotlin/org/openapitools/client/models",
    ),
    "swift5": ([], "OpenAPIClient/Classes/OpenAPIs/Models"),
    "typescript-fetch": ([], "models"),
}


@dataclass(frozen=True)
class Generated:
    folder: Path
    returncode: int
    output: str
    seconds: float


def generate(root: Path) -> dict[str, Any]:
    """Each language's client, and what its run said."""
    cli = Path(sys.executable).parent / "openapi-generator-cli"
    made = {}
    for name, (options, _) in GENERATORS.items():
        folder = root / name
        started = time.monotonic()
        ran = subprocess.run(
            [str(cli), "generate", "-i", str(OPENAPI), "-g", name, "-o", str(folder), *options],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        took = time.monotonic() - started
        made[name] = {"returncode": ran.returncode, "output": ran.stdout + ran.stderr, "took": took}
    times = ", ".join(f"{name} {made[name]['took']:.1f} s" for name in made)
    SUMMARY_LINES.append(f"openapi-generator clients: {times}")
    return made


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Generated]:
    """Each language generated once for the run."""
    if shutil.which("java") is None:
        pytest.skip(
            "java not found: openapi-generator needs Java 17 (Debian: openjdk-17-jre-headless)"
        )
    root, made = once_per_run(tmp_path_factory, "openapi_generator", generate)
    return {
        name: Generated(root / name, ran["returncode"], ran["output"], ran["took"])
        for name, ran in made.items()
    }


@pytest.mark.parametrize("name", list(GENERATORS))
def test_each_generator_makes_its_client_without_error(
    generated: dict[str, Generated], name: str
) -> None:
    made = generated[name]
    errors = [line for line in made.output.splitlines() if "ERROR" in line]
    assert made.returncode == 0 and not errors, made.output
    # every model it wrote is a named schema: no inline object it had to name
    models = {path.stem for path in (made.folder / GENERATORS[name][1]).iterdir()} - {"index"}
    assert models, made.output
    unnamed = models - schema_names()
    assert not unnamed, f"{name}: models of inline objects: {sorted(unnamed)}"


def installed_typescript() -> Path:
    """tsc as ts/package-lock.json pins it, installed into ts/node_modules when it is not."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: the TypeScript client is compiled with tsc from npm")
    pinned = json.loads((TS / "package.json").read_text())["devDependencies"]["typescript"]
    installed = TS / "node_modules" / "typescript" / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != pinned:
        ran = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=TS,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
    return TS / "node_modules" / "typescript" / "bin" / "tsc"


def test_the_typescript_client_compiles_and_launches_and_polls(
    generated: dict[str, Generated],
    stack: StackProcess,
    tmp_path: Path,
) -> None:
    tsc = installed_typescript()
    node = shutil.which("node")
    assert node is not None  # npm comes with node
    made = generated["typescript-fetch"]
    assert made.returncode == 0, made.output
    shutil.copytree(made.folder, tmp_path / "client")
    for name in ("driver.ts", "tsconfig.json"):
        shutil.copy(TS / name, tmp_path / name)
    compiled = subprocess.run(
        [node, str(tsc), "-p", str(tmp_path / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr

    user = f"generated-ts-{uuid.uuid4().hex[:12]}"
    created = requests.post(
        f"{stack.url('emulator')}/emulator/v1/orders",
        json={"user_id": user, "service": "taxi", "status": "driving"},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    orderid = created.json()["orderid"]
    ran = subprocess.run(
        [
            node,
            str(tmp_path / "dist" / "driver.js"),
            stack.url("launch"),
            stack.url("orders_state"),
            user,
            orderid,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = json.loads(ran.stdout)
    # launch: the order, actual, its parts to fetch; the taxi policy; parsed into camelCase
    [launched] = said["launch"]["orders"]
    assert launched["orderid"] == orderid and launched["updateStatus"] == "actual"
    assert "fast_info" in launched["needRequest"]
    assert said["launch"]["policyUrls"] == [
        rule.url for rule in POLICY.services["taxi"].rules_by_priority
    ]
    assert said["launch"]["allowedChanges"] == ["taxi"]
    # the poll with the order as known: the same order, the same parts to fetch
    [polled] = said["poll"]["orders"]
    assert polled == launched
    assert said["poll"]["policyVersions"] == {"taxi": POLICY.version("taxi")}
    # its answer_tag sent back: a 204, which the generated client takes as success
    assert said["poll"]["answerTag"]
    assert said["again"] == {"status": 204, "ok": True}
