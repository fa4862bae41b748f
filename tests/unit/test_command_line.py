"""The command line's parsing: a command's TABLEs before or after its options, and anything else unknown
refused with argparse's usage line (exit 2). A server that breaks off a command is one line, not a traceback."""

from __future__ import annotations

import signal

import psycopg
import pymysql
import pytest

import seam.cli.stream
from seam.cli import main
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


@pytest.mark.parametrize(
    "error, said",
    [
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command\nSSL"), "the target"),
        (pymysql.err.OperationalError(2013, "Lost connection to server during query"), "the source"),
    ],
)
def test_a_server_breaking_off_a_command_is_one_line(error, said, monkeypatch, capsys):
    def breaks(args, procs):
        raise error

    monkeypatch.setattr(seam.cli.stream, "cmd_stream", breaks)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # main's SIGTERM handler stays out of pytest
    assert main(["stream", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"seam: {said} broke off the command (") and err.count("\n") == 1, err


def test_anything_else_keeps_its_traceback(monkeypatch):
    def breaks(args, procs):
        raise ValueError("a bug")

    monkeypatch.setattr(seam.cli.stream, "cmd_stream", breaks)
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    with pytest.raises(ValueError):
        main(["stream", "status"])
