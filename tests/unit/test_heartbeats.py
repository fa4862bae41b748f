"""The change reader's heartbeats (``Chains.heartbeats``): a table the binlog's changes passed by is told so,
but over hundreds of tables each at most every ``len(tables) / BEATS_PER_S`` seconds (not every table twice
a second under a writer); at the binlog's end every table at once; an idle, current table every
``IDLE_BEAT_S``."""

from __future__ import annotations

import time

from seam.config import DEFAULT_PIPELINE, load_pipeline
from seam.core.position import Position
from seam.source.chains import BEATS_PER_S, Chains, Followed

ENV = {"SEAM_MYSQL_PASSWORD": "s", "SEAM_TARGET_PASSWORD": "t"}


class Sent:
    def __init__(self):
        self.topics: list[str] = []

    def send(self, topic, value, key, headers=None):
        self.topics.append(topic)


def _chains(tables: int) -> Chains:
    chains = Chains(load_pipeline(DEFAULT_PIPELINE, env=ENV), {})
    for i in range(tables):
        chains.followed[("db", f"t{i}")] = Followed(
            table=None, schema=None, topic=f"topic{i}", published=Position("bin.000001", 4), batch=None
        )
    return chains


def _beat(chains: Chains, pos: int, every_table: bool = False) -> list[str]:
    sent = Sent()
    chains.heartbeats(sent, Position("bin.000001", pos), every_table=every_table)
    return sent.topics


def test_few_tables_are_beaten_at_every_call_as_before():
    chains = _chains(8)
    assert len(_beat(chains, 100)) == 8
    time.sleep(8 / BEATS_PER_S + 0.01)
    assert len(_beat(chains, 200)) == 8
    assert _beat(chains, 200) == []  # current, and beaten just now


def test_hundreds_of_tables_are_beaten_at_most_every_tables_over_beats_per_s():
    chains = _chains(300)
    assert len(_beat(chains, 100)) == 300
    assert _beat(chains, 200) == []  # behind again, but beaten less than 1.5 s ago
    for f in chains.followed.values():
        f.beat_at -= 300 / BEATS_PER_S
    assert len(_beat(chains, 300)) == 300
    assert len(_beat(chains, 400, every_table=True)) == 300  # the binlog's end: every table is current there
    assert all(f.published == Position("bin.000001", 400) for f in chains.followed.values())
