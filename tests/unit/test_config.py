"""Pipeline config: the demo file is valid, and every kind of bad input names its field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from seam.config import DEFAULT_PIPELINE, ConfigError, load_pipeline, parse_duration, parse_pipeline
from seam.core.pipeline import Secret

ENV = {"SEAM_MYSQL_PASSWORD": "s3cret-src", "SEAM_TARGET_PASSWORD": "s3cret-tgt"}


def demo_raw() -> dict:
    return yaml.safe_load(DEFAULT_PIPELINE.read_text())


def parse(raw, env=ENV):
    return parse_pipeline(raw, source="test.yaml", env=env)


def test_demo_pipeline_loads_with_defaults_and_env():
    p = load_pipeline(DEFAULT_PIPELINE, env={**ENV, "SEAM_MYSQL_PORT": "4406"})
    assert p.source.port == 4406
    assert p.source.host == "127.0.0.1"
    assert p.kafka.bootstrap == "127.0.0.1:39092"
    assert p.target.state_schema == "seam"
    assert [t.name for t in p.tables] == ["demo.accounts", "demo.payments", "demo.audit_log", "demo.type_zoo"]
    payments = p.table("payments")
    assert payments.key == ("id",) and payments.cursor == "updated_at" and payments.sync == "stream"
    assert p.table("demo.accounts").sync == "windows" and p.table("demo.accounts").incremental
    assert payments.soft_delete == "is_deleted" and payments.safety_delay_s == 30.0
    audit = p.table("demo.audit_log")
    assert audit.keyless and not audit.incremental and audit.semantics == "exactly-once"
    assert p.repair.after_cutover and p.repair.max_rows == 100_000  # a cut-over's table is repaired by the stream


def test_secrets_never_print():
    p = parse(demo_raw())
    assert p.source.password.reveal() == "s3cret-src"
    for text in (repr(p), str(p), repr(p.source), f"{p.target}"):
        assert "s3cret" not in text
    assert str(Secret("x")) == "***"
    # a driver gets the value; a dict of its arguments in a log line or a failed assert's report does not show it
    for kwargs in (p.source.pymysql_kwargs(), p.target.conninfo()):
        assert "s3cret" not in repr(kwargs) and "s3cret" not in f"{kwargs}"
        assert kwargs["password"].startswith("s3cret") and kwargs["password"].encode().startswith(b"s3cret")


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda r: r["tables"][1].update(curser="updated_at"), "tables[1].curser", "did you mean 'cursor'"),
        (lambda r: r.update(sauce={}), "sauce", "unknown key"),
        (lambda r: r["source"].update(port=70000), "source.port", "out of range for a port"),
        (lambda r: r["target"].update(port="abc"), "target.port", "not a port"),
        (lambda r: r["target"].update(text_nul="drop"), "target.text_nul", "must be one of: replace, strip"),
        (lambda r: r["target"].update(zero_dates="epoch"), "target.zero_dates", "must be one of: -infinity, null"),
        (lambda r: r.update(stream={"sink": "flink"}), "stream.sink", "must be one of: spark, direct"),
        (lambda r: r.update(stream={"max_transaction_memory": 1000}), "stream.max_transaction_memory", "out of range"),
        (lambda r: r["tables"][0].pop("name"), "tables[0].name", "is required"),
        (lambda r: r["tables"][0].update(name="accounts"), "tables[0].name", "database.table"),
        (lambda r: r["tables"].append({"name": "demo.accounts"}), "tables[4].name", "listed twice"),
        (lambda r: r.update(tables=[]), "tables", "non-empty"),
        (lambda r: r.pop("tables"), "tables", "is required"),
        (lambda r: r["tables"][0].update(safety_delay="soon"), "tables[0].safety_delay", "not a duration"),
        (lambda r: r["tables"][2].update(semantics="at-least-once"), "tables[2].semantics", "needs a key"),
        (lambda r: r["tables"][0].update(semantics="maybe"), "tables[0].semantics", "must be one of"),
        (lambda r: r["tables"][2].update(incremental=True), "tables[2].cursor", "kept current by windows"),
        (lambda r: r["tables"][2].update(sync="windows"), "tables[2].cursor", "kept current by windows"),
        (lambda r: r["tables"][1].update(sync="binlog"), "tables[1].sync", "use stream (binlog) or windows"),
        (lambda r: r["tables"][1].update(sync="stream", incremental=True), "tables[1].incremental", "contradicts"),
        (lambda r: r["tables"][1].update(synk="stream"), "tables[1].synk", "did you mean 'sync'"),
        (lambda r: r["tables"][0].update(key=["id", "id"]), "tables[0].key", "twice"),
        (lambda r: r["kafka"].update(bootstrap="nohost"), "kafka.bootstrap", "host:port"),
        (lambda r: r["kafka"].update(topic_prefix="bad topic!"), "kafka.topic_prefix", "characters"),
        (lambda r: r["target"].update(type="snowflake"), "target.type", "postgres"),
        (lambda r: r.update(version=2), "version", "unsupported"),
        (lambda r: r["spark"].update(partitions=0), "spark.partitions", "out of range"),
        (lambda r: r["kafka"].update(partitions=3), "kafka.partitions", "must be 1"),
        (lambda r: r["tables"][1].update(checks={"colums": {}}), "tables[1].checks.colums", "did you mean 'columns'"),
        (lambda r: r["tables"][1].update(checks={"count": "yes"}), "tables[1].checks.count", "true or false"),
        (
            lambda r: r["tables"][1].update(checks={"columns": {"amount": {"avg": {}}}}),
            "tables[1].checks.columns.amount.avg",
            "unknown key",
        ),
        (
            lambda r: r["tables"][1].update(checks={"columns": {"amount": {"sum": {"equal_to": [1]}}}}),
            "tables[1].checks.columns.amount.sum.equal_to",
            "must be a number",
        ),
        (lambda r: r.update(notify={"webhook": "ftp://x"}), "notify.webhook", "http(s) URL"),
        (lambda r: r.update(notify={"email": {"to": "nobody"}}), "notify.email.to", "e-mail address"),
        (lambda r: r.update(notify={"email": {"cc": "a@b"}}), "notify.email.cc", "unknown key"),
        (lambda r: r.update(notify={"pager": "x"}), "notify.pager", "unknown key"),
        (lambda r: r.update(repair={"after_cutover": "yes"}), "repair.after_cutover", "must be true or false"),
        (lambda r: r.update(repair={"after_cut_over": False}), "repair.after_cut_over", "did you mean 'after_cutover'"),
    ],
)
def test_bad_config_names_the_field(mutate, field, words):
    raw = demo_raw()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert err.value.field_path == field
    assert words in str(err.value)
    assert str(err.value).startswith(f"test.yaml: {field}: ")


def test_missing_env_var_names_field_and_variable():
    with pytest.raises(ConfigError) as err:
        parse(demo_raw(), env={"SEAM_TARGET_PASSWORD": "x"})
    assert err.value.field_path == "source.password"
    assert "SEAM_MYSQL_PASSWORD" in str(err.value)


def test_table_lookup():
    p = parse(demo_raw())
    assert p.table("demo.type_zoo").table == "type_zoo"
    with pytest.raises(ConfigError, match="no table 'nope'.*demo.accounts"):
        p.table("nope")


def test_durations():
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120
    assert parse_duration(5) == 5.0
    for bad in ("-1", "1d", "", True):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_invalid_yaml_and_missing_file(tmp_path: Path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("source: [unclosed\n")
    with pytest.raises(ConfigError, match="line 2: not valid YAML"):
        load_pipeline(bad, env=ENV)
    with pytest.raises(ConfigError, match="file not found"):
        load_pipeline(tmp_path / "nope.yaml", env=ENV)


def test_cli_prints_one_clear_line_for_a_broken_pipeline(tmp_path: Path):
    raw = demo_raw()
    raw["tables"][1]["curser"] = "updated_at"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(raw))
    for argv in (["--pipeline", str(broken), "status"], ["seed", "--pipeline", str(broken)]):
        proc = subprocess.run(
            [sys.executable, "-m", "seam.cli", *argv],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", **ENV, "SEAM_STATE_DIR": str(tmp_path / "state")},
        )
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert lines == [f"seam: configuration: {broken}: tables[1].curser: unknown key (did you mean 'cursor'?)"]
        assert proc.stdout == ""


def test_checks_and_notifiers_as_data():
    raw = demo_raw()
    raw["tables"][1]["checks"] = {
        "count": True,
        "columns": {"amount": {"sum": {}, "null_count": {"equal_to": 0}}, "memo": ["null_count"]},
    }
    raw["notify"] = {"webhook": "http://127.0.0.1:9/hook", "email": {"to": "ops@example.com", "conn_id": "smtp_ops"}}
    pipeline = parse(raw)
    payments = pipeline.table("payments")
    assert payments.checks["columns"] == {
        "amount": {"sum": {}, "null_count": {"equal_to": 0}},
        "memo": {"null_count": {}},
    }
    assert pipeline.table("type_zoo").checks == {"columns": {}}
    assert pipeline.notify == {
        "webhook": "http://127.0.0.1:9/hook",
        "email": {"to": ["ops@example.com"], "conn_id": "smtp_ops", "subject": "", "from": "seam@localhost"},
    }
