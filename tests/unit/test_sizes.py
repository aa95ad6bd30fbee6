"""The size rule's checker finds what it must (issue 16): a long function and a long
module in a product folder, and nothing in a tree that keeps the rule."""

from __future__ import annotations

from pathlib import Path

from humanwork_dev import sizes


def test_the_checker_names_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "platform_api").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "platform_api" / "long.py").write_text(f"def too_long():\n{body}")
    (tmp_path / "agent_image").mkdir()
    (tmp_path / "agent_image" / "big.py").write_text("x = 1\n" * 601)
    (tmp_path / "agent_image" / "fine.py").write_text("def ok():\n    return 1\n")
    found = sizes.offenders(tmp_path)
    assert found == [
        "platform_api/long.py:1: too_long has 61 lines (at most 60)",
        "agent_image/big.py: module of 601 lines (at most 600)",
    ]


def test_the_product_folders_keep_the_rule() -> None:
    assert sizes.offenders(Path(__file__).resolve().parents[2]) == []
