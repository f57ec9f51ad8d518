"""The benchmark and chaos harness (payflow_lab, lab/) stays out of the product.

payflow_lab imports payflow, never the other way round: no module of payflow/ imports
payflow_lab when it is imported, and only `payflow bench` / `payflow chaos` import it, inside
the command, after `require_lab()`. The wheel of the root project carries no harness
module, and an install made the way the Dockerfile makes it (`uv sync --frozen --no-dev`
on what it copies) has no payflow_lab, answers `payflow --help`, and refuses the harness
commands with one line.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ROOT / "payflow"
# The only product modules that may import payflow_lab, and only inside a function.
LAZY_IMPORTERS = {"payflow/commands/bench.py", "payflow/commands/chaos.py"}
# Where the harness lived before it moved to lab/payflow_lab, and the lab itself.
HARNESS_PATHS = (
    "payflow/bench/",
    "payflow/chaos/",
    "payflow/ports.py",
    "payflow/chain/anvil.py",
    "payflow/chain/contracts/",
    "payflow_lab/",
)


def _imported_modules(node: ast.AST) -> list[str]:
    """The modules an import statement (or `importlib.import_module("...")` call with a
    literal name) names; [] for any other node."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else []
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        in ("import_module", "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def _lab_imports(source: str, filename: str) -> list[tuple[int, bool]]:
    """(line, inside a function) of every import of payflow_lab in `source`."""
    tree = ast.parse(source, filename)
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for module in _imported_modules(node):
            if module == "payflow_lab" or module.startswith("payflow_lab."):
                found.append((getattr(node, "lineno", 0), in_function))
        nested = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            visit(child, nested)

    visit(tree, False)
    return found


def _violations(files: dict[str, str]) -> list[str]:
    """`path:line` of each payflow_lab import that breaks the direction rule in `files`
    (path relative to the repository → source)."""
    bad = []
    for path, source in sorted(files.items()):
        for line, in_function in _lab_imports(source, path):
            if not (in_function and path in LAZY_IMPORTERS):
                bad.append(f"{path}:{line}")
    return bad


def test_the_rule_catches_module_level_and_stray_imports() -> None:
    """The checker itself: each form of import is seen, and only the lazy one in a
    command module passes."""
    files = {
        "payflow/a.py": "import payflow_lab\n",
        "payflow/b.py": "from payflow_lab.bench import ledger\n",
        "payflow/c.py": "def f():\n    from payflow_lab.ports import free_port\n",
        "payflow/d.py": "import importlib\nimportlib.import_module('payflow_lab.anvil')\n",
        "payflow/commands/bench.py": "import payflow_lab.bench as b\n",
        "payflow/commands/chaos.py": "def run():\n    from payflow_lab.chaos import run\n",
        "payflow/e.py": "import payflow_labs\nfrom payflow.ports import x\n",
    }
    assert _violations(files) == [
        "payflow/a.py:1",
        "payflow/b.py:1",
        "payflow/c.py:2",
        "payflow/commands/bench.py:1",
        "payflow/d.py:2",
    ]


def test_payflow_never_imports_payflow_lab_at_import_time() -> None:
    files = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for path in PRODUCT.rglob("*.py")
    }
    assert "payflow/commands/bench.py" in files
    assert _violations(files) == []


def _uv() -> str:
    uv = shutil.which("uv")
    assert uv is not None, "uv is not on PATH (run the tests with `uv run pytest`)"
    return uv


def test_the_wheel_has_no_harness_module(tmp_path: Path) -> None:
    subprocess.run(
        [_uv(), "build", "--wheel", "--out-dir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("payflow-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {name: archive.read(name).decode() for name in names if name.endswith(".py")}
    assert "payflow/cli.py" in names
    assert "payflow/chain/rpc.py" in names  # the product's chain code stays
    assert [name for name in names if name.startswith(HARNESS_PATHS)] == []
    assert _violations(sources) == []


def _dockerfile_copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY line of the Dockerfile."""
    copies = []
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY "):
            words = shlex.split(line)
            copies.append((words[1:-1], words[-1]))
    return copies


@pytest.fixture(scope="module")
def image_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the image holds: the Dockerfile's COPY sources in a fresh directory and the
    Dockerfile's `uv sync --frozen --no-dev` into a fresh environment. Returns its bin/."""
    app = tmp_path_factory.mktemp("image") / "app"
    app.mkdir()
    copies = _dockerfile_copies()
    assert copies, "the Dockerfile copies nothing"
    for sources, _ in copies:
        for source in sources:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, app / source, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(origin, app / source)
    assert not (app / "lab").exists(), "the Dockerfile copies the lab"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT")}
    env["UV_PROJECT_ENVIRONMENT"] = str(app / "venv")
    subprocess.run(
        [_uv(), "sync", "--frozen", "--no-dev", "--quiet"],
        cwd=app,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return app / "venv" / "bin"


def _run_in(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        cwd=bin_dir.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_image_install_has_no_lab_and_payflow_help_works(image_install: Path) -> None:
    probe = _run_in(
        image_install,
        "python",
        "-c",
        "import importlib.util, payflow.cli; "
        "print(importlib.util.find_spec('payflow_lab') is None, payflow.cli.__file__)",
    )
    assert probe.returncode == 0, probe.stderr
    found, cli_file = probe.stdout.split()
    assert found == "True"
    assert not cli_file.startswith(str(ROOT))  # the copied product, not this checkout

    help_ = _run_in(image_install, "payflow", "--help")
    assert help_.returncode == 0, help_.stderr
    assert "migrate" in help_.stdout and "bench" in help_.stdout


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (("bench", "ledger", "--events", "10"), "payflow bench ledger"),
        (("bench", "chain"), "payflow bench chain"),
        (("chaos", "--events", "50"), "payflow chaos"),
    ],
)
def test_the_image_install_refuses_harness_commands_in_one_line(
    image_install: Path, command: tuple[str, ...], name: str
) -> None:
    result = _run_in(image_install, "payflow", *command)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"payflow: `{name}` needs the dev install (the payflow_lab package: `uv sync` in a "
        "checkout); this install has only the service"
    ]
    assert result.stdout == ""


def test_the_dev_install_reaches_the_harness() -> None:
    """In this (dev) environment `payflow bench ledger` passes the lab check and reaches
    its own argument check (exit 2), which runs after the harness is imported."""
    payflow = Path(sys.executable).parent / "payflow"
    result = subprocess.run(
        [str(payflow), "bench", "ledger", "--mode", "sideways"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == ["payflow: --mode must be spread, hot or system"]
