"""The command line's parsing: a command's TABLEs before or after its options, and anything else unknown
refused with argparse's usage line (exit 2)."""

from __future__ import annotations

import pytest

from seam.cli.parser import parse_arguments


@pytest.mark.parametrize(
    "argv",
    [
        ["load", "full", "--restart", "a.t", "b.u"],
        ["load", "full", "a.t", "--restart", "b.u"],
        ["load", "full", "a.t", "b.u", "--restart"],
    ],
)
def test_tables_may_follow_the_options(argv):
    args = parse_arguments(argv)
    assert (args.mode, args.tables, args.restart) == ("full", ["a.t", "b.u"], True)


def test_validate_and_status_take_tables_after_options_too():
    assert parse_arguments(["validate", "--limit", "5", "a.t"]).tables == ["a.t"]
    assert parse_arguments(["validate", "a.t", "--json", "b.u"]).tables == ["a.t", "b.u"]
    assert parse_arguments(["status", "a.t"]).tables == ["a.t"]


@pytest.mark.parametrize(
    "argv",
    [
        ["load", "full", "--restrat", "a.t"],  # a typo stays an error, never a table
        ["stream", "status", "extra"],  # a command without TABLEs keeps refusing words it does not know
        ["down", "mysql"],
    ],
)
def test_anything_else_unknown_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_arguments(argv)
    assert exited.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
