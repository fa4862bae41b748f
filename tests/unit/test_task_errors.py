"""A Seam error raised in a Spark task reaches the driver as text inside Py4J's exception: it is found and
told as its own one line, of its kind."""

from __future__ import annotations

from seam.core.errors import SeamError, SourceError, TargetError, raised_in_a_task
from seam.source.snapshot import ShapeChangeError

PY4J = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/include/seam/source/snapshot.py", line 175, in _lock_tables
    raise SnapshotError(
seam.source.snapshot.SnapshotError: chunk 0: the portable snapshot needs the LOCK TABLES privilege: GRANT LOCK
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
"""


def test_the_tasks_error_is_found_with_its_kind():
    found = raised_in_a_task(Exception(PY4J))
    assert isinstance(found, SourceError) and not found.retry
    assert str(found) == "chunk 0: the portable snapshot needs the LOCK TABLES privilege: GRANT LOCK"
    target = raised_in_a_task(Exception("x\nseam.wire.codecs.TargetError: column 'a': '99' is not a number\n"))
    assert isinstance(target, TargetError) and str(target) == "column 'a': '99' is not a number"
    other = raised_in_a_task(Exception("seam.validate.side.ValidationError: no"))
    assert type(other) is SeamError


def test_a_task_that_failed_otherwise_is_left_as_it_is():
    assert raised_in_a_task(Exception("java.lang.OutOfMemoryError: Java heap space")) is None
    assert raised_in_a_task(Exception("ValueError: nothing of ours")) is None


def test_an_error_the_driver_acts_on_comes_back_as_its_own_class():
    """A chunk that found its table changed shape: the load gives its batch up at once (seam.source.full_load),
    which it can tell only from the class."""
    text = "x\nseam.source.snapshot.ShapeChangeError: db.t changed shape before it was read (columns w ...)\n"
    found = raised_in_a_task(Exception(text), (ShapeChangeError,))
    assert type(found) is ShapeChangeError and not found.retry and str(found).startswith("db.t changed shape")
    assert type(raised_in_a_task(Exception(text))) is SourceError  # not asked for: of its kind
    assert type(raised_in_a_task(Exception(PY4J), (ShapeChangeError,))) is SourceError
