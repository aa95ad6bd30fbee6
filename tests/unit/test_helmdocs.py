"""The chart's values table (humanwork_dev.helmdocs): every value documented by the comment
above it, the table rewritten between its markers, and `--check` failing on a stale table or
an undocumented value."""

from __future__ import annotations

from pathlib import Path

import pytest

from humanwork_dev import helmdocs

VALUES = """\
# The file's own comment: not a value's (a blank line follows).

images:
  # The image repository.
  repository: humanwork/operator
  # Its tag | or digest.
  tag: "0.1.0"
# Requests and limits, as one map.
resources:
  requests:
    cpu: 100m
admission:
  # Images an agent may run.
  agentImages: "humanwork/agent:*"
"""


def test_rows_follow_the_comments_above_each_key() -> None:
    rows = helmdocs.rows(VALUES)
    assert [(r.path, r.default, r.meaning) for r in rows] == [
        ("images.repository", '"humanwork/operator"', "The image repository."),
        ("images.tag", '"0.1.0"', "Its tag | or digest."),
        ("resources", '{"requests": {"cpu": "100m"}}', "Requests and limits, as one map."),
        ("admission.agentImages", '"humanwork/agent:*"', "Images an agent may run."),
    ]
    table = helmdocs.table(VALUES)
    assert '| `images.tag` | `"0.1.0"` | Its tag \\| or digest. |' in table


def test_an_undocumented_value_is_an_error() -> None:
    undocumented = VALUES + "replicas: 2\n"
    with pytest.raises(helmdocs.ValuesDocError, match="replicas has no comment"):
        helmdocs.rows(undocumented)


def chart(tmp_path: Path, values: str, table: str = "") -> Path:
    (tmp_path / "values.yaml").write_text(values)
    readme = f"# Chart\n\n{helmdocs.BEGIN}\n{table}{helmdocs.END}\n\nAfter.\n"
    (tmp_path / "README.md").write_text(readme)
    return tmp_path


def test_check_fails_on_a_stale_table_and_passes_once_written(tmp_path: Path) -> None:
    folder = chart(tmp_path, VALUES)
    assert helmdocs.main(["--chart", str(folder), "--check"]) == 1
    assert helmdocs.main(["--chart", str(folder)]) == 0
    readme = (folder / "README.md").read_text()
    assert "| `admission.agentImages` |" in readme and readme.endswith("After.\n")
    assert helmdocs.main(["--chart", str(folder), "--check"]) == 0


def test_check_fails_on_an_undocumented_value(tmp_path: Path) -> None:
    folder = chart(tmp_path, VALUES)
    assert helmdocs.main(["--chart", str(folder)]) == 0
    (folder / "values.yaml").write_text(VALUES + "replicas: 2\n")
    assert helmdocs.main(["--chart", str(folder), "--check"]) == 1


def test_the_repositorys_table_is_current() -> None:
    assert helmdocs.main(["--check"]) == 0
