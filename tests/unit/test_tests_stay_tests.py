"""Nothing outside `tests/` runs code from it: no module of the product, the development
harness or the benches imports `tests`, and no Makefile target or script runs a file under
`tests/` (the Makefile hands `tests/` to pytest, nothing else)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "humanwork_core",
    "platform_api",
    "agent_image",
    "operator",
    "kubectl_humanwork",
    "humanwork_dev",
    "bench",
)
RUNS_A_TEST_FILE = re.compile(r"(?:bash|sh|python\S*|\.venv/bin/\S+)\s+\S*tests/\S+")


def imports_of_tests(path: Path) -> list[int]:
    """The lines of `path` that import the `tests` package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            found.append(node.lineno)
    return found


def test_no_module_outside_the_tests_imports_them() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for line in imports_of_tests(path)
    ]
    assert found == []


def test_the_checker_sees_an_import_of_the_tests(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom tests.platform.conftest import Api\nimport tests.unit\n")
    assert imports_of_tests(module) == [2, 3]


def test_no_target_or_script_runs_a_file_under_tests() -> None:
    sources = [REPO / "Makefile", REPO / ".ci" / "run"]
    sources += sorted((REPO / "humanwork_dev" / "scripts").glob("*.sh"))
    found = [
        f"{source.relative_to(REPO)}: {line.strip()}"
        for source in sources
        for line in source.read_text().splitlines()
        if RUNS_A_TEST_FILE.search(line) and "-m pytest" not in line
    ]
    assert found == []
    assert RUNS_A_TEST_FILE.search("\t@bash tests/postgres/install.sh")
