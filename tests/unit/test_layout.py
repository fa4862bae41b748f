"""Rooms a newcomer reads in one sitting: no module of ``include/seam`` over 600 lines, and no function of
Seam's code over 80 lines unless its docstring says why (``Its length: ...``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE_LINES, FUNCTION_LINES = 600, 80


def test_no_module_of_the_library_is_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "include" / "seam").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MODULE_LINES
    }
    assert not long, long


def test_a_function_over_80_lines_says_why():
    unexplained = []
    for folder in ("include/seam", "plugins", "dags", "spark_jobs"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > FUNCTION_LINES and "Its length:" not in (ast.get_docstring(node) or ""):
                        unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not unexplained, unexplained
