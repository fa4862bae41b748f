"""One error base: every error Seam raises to a user is a SeamError with a kind and a retry rule; the CLI
prints it as one line, and the Airflow operators fail at once or retry by that rule."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import seam
from seam.core.errors import ONE_LINE, SeamError, one_line

INTERNAL = {"LockWait", "Rewind", "Unsure", "SeamError"}  # control flow inside one unit; the base itself
KINDS = {"configuration", "source", "broker", "target", "divergence", "validation", "load", "busy", "stream", "stack"}


def _error_classes():
    for info in pkgutil.walk_packages(seam.__path__, "seam."):
        if info.name.endswith(".__main__"):  # runs the command it is
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == info.name:
                yield name, obj


def test_every_error_class_of_seam_is_a_seam_error_with_a_known_kind():
    found = dict(_error_classes())
    assert {"ConfigError", "SchemaError", "SinkError", "RepairError", "LoadError", "ValidationError"} <= set(found)
    for name, cls in found.items():
        if name in INTERNAL:
            continue
        assert issubclass(cls, SeamError), f"{cls.__module__}.{name} is not a SeamError"
        assert cls.kind in KINDS, f"{cls.__module__}.{name}: kind {cls.kind!r}"


def test_the_kinds_keep_their_retry_rule_and_the_builtin_bases_code_catches():
    from seam.config import ConfigError
    from seam.core.schema import SchemaError
    from seam.repair import RepairError
    from seam.wire.topics import BrokerError

    assert not ConfigError("tables[0]", "x").retry and isinstance(ConfigError("f", "m"), ValueError)
    assert isinstance(SchemaError("t"), LookupError)
    assert BrokerError("down").retry and not RepairError("too many").retry


def test_the_one_line_names_the_kind_and_is_recognised_in_a_child_process_output():
    from seam.core.schema import SchemaError

    line = one_line(SchemaError("demo.x does not exist"))
    assert line == "seam: source: demo.x does not exist" and ONE_LINE.match(line)
    assert not ONE_LINE.match("26/11/25 WARN NativeCodeLoader: seam: x")


@pytest.mark.parametrize("retry", [False, True])
def test_an_operator_fails_at_once_or_is_retried_by_the_errors_rule(retry):
    from airflow.sdk.exceptions import AirflowException

    from seam.load_run import LoadError
    from seam.validate.validation import NotLoaded
    from seam_airflow.operators import BadInput, seam_errors

    error = LoadError("batch b failed") if retry else NotLoaded("run `seam load full demo.x` first")
    with pytest.raises(AirflowException if retry else BadInput) as caught, seam_errors():
        raise error
    line = str(caught.value) if retry else caught.value.line
    assert line == one_line(error)
