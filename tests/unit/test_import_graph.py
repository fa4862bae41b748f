"""The import graph of ``include/seam``, drawn from the code with ``ast``: the ground floor (``seam.core``)
imports nothing else of Seam, every room imports only rooms on the floors below it (``FLOORS``, the one
place the house's order is written), and there is no import circle, neither among module-level imports nor
closed by an import inside a function (``KNOWN_CIRCLES`` would list one that had to stay, as a debt)."""

from __future__ import annotations

import ast
from pathlib import Path

INCLUDE = Path(__file__).resolve().parents[2] / "include"

# The floors, lowest first. A room (a package under seam, or a top-level module) imports its own modules and
# rooms on lower floors, never a room beside it or above it: the sink (apply) never reads the source, the
# source never applies, the state schema has one owner below both.
FLOORS: list[set[str]] = [
    {"core"},  # identifiers, table schema, positions, errors, the pipeline model
    {"settlement"},  # the settlement section of a pipeline file
    {"config"},  # reading a pipeline file
    {"files", "spark_classes", "spark_daemon"},
    {"alerts", "processes", "spark"},
    {"wire", "spark_driver"},  # records, codecs, BEGIN/END, topics; the shared Spark driver
    {"state"},  # the seam schema in the target, and the connection to it
    {"source", "apply"},
    {"validate", "load_output", "load_run"},
    {"loads", "supervise", "waiting", "wiring"},
    {"repair"},
    {"cli"},
]

# closed only through imports inside functions; each is a debt: remove it from here when it is gone
KNOWN_CIRCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in (INCLUDE / "seam").rglob("*.py"):
        parts = path.relative_to(INCLUDE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, all imports) of Seam's modules, by module."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    top: dict[str, set[str]] = {m: set() for m in modules}
    every: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        in_body = {
            id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                target = owner(name) if name.startswith("seam") else None
                if target and target != module and not module.startswith(target + "."):
                    every[module].add(target)
                    if id(node) not in in_body:
                        top[module].add(target)
    return top, every


def _circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_ground_floor_imports_nothing_above_it():
    top, every = _graph()
    core = {m for m in every if m == "seam.core" or m.startswith("seam.core.")}
    assert {
        "seam.core.errors",
        "seam.core.identifiers",
        "seam.core.schema",
        "seam.core.position",
        "seam.core.pipeline",
    } <= core
    above = {m: sorted(t for t in every[m] if t not in core) for m in core}
    assert all(not targets for targets in above.values()), above


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_room_imports_only_the_floors_below_it():
    _, every = _graph()
    floor = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
    rooms = {_room(m) for m in every if m != "seam"}
    assert rooms <= floor.keys(), f"a room with no floor: add it to FLOORS: {sorted(rooms - floor.keys())}"
    upward = sorted(
        (m, t)
        for m, targets in every.items()
        for t in targets
        if _room(t) != _room(m) and floor[_room(t)] >= floor[_room(m)]
    )
    assert not upward, f"imports of a room beside or above: {upward}"


def test_module_level_imports_have_no_circle():
    top, _ = _graph()
    assert _circles(top) == set()


def test_the_circles_closed_by_function_body_imports_are_only_the_known_ones():
    _, every = _graph()
    circles = _circles(every)
    assert circles <= KNOWN_CIRCLES, f"a new import circle: {[sorted(c) for c in circles - KNOWN_CIRCLES]}"
    assert circles == KNOWN_CIRCLES, (
        f"gone, take them off KNOWN_CIRCLES: {[sorted(c) for c in KNOWN_CIRCLES - circles]}"
    )


def test_a_stream_start_imports_neither_part_before_it_starts_them():
    """`seam stream start` starts the change reader and the sink as processes; what it imports before that
    delays the reader's first read, which a backlog waits for. So the module the parser routes it to reaches
    neither part's code through module-level imports (the parts run in the foreground go to theirs), nor the
    state's connection (psycopg's import, 0.09 s, ran before the spawn until session 69)."""
    from seam.cli.parser import build_parser, command_of
    from seam.source.schema import reachable

    parse = build_parser().parse_args
    assert command_of(parse(["stream", "sink"])) == command_of(parse(["stream", "start", "--foreground"]))
    module = "seam.cli." + command_of(parse(["stream", "start"])).split(".")[0]
    top, _ = _graph()
    reached = set().union(*(reachable(m, lambda n: top.get(n, ())) for m in ("seam", "seam.cli", module)))
    parts = {
        "seam.cli.stream_parts",
        "seam.cli.stream_reader",
        "seam.source.streaming",
        "seam.source.binlog",
        "seam.apply.sink",
        "seam.load_run",
        "seam.state.connection",
    }
    assert module in top and not reached & parts, sorted(reached & parts)


def test_the_change_reader_process_imports_neither_the_sink_nor_spark():
    """`seam stream reader` has a module of its own, so that a reader started on a backlog reads sooner: it does
    not reach the sink's code or Spark's helpers through module-level imports."""
    from seam.cli.parser import build_parser, command_of
    from seam.source.schema import reachable

    module = "seam.cli." + command_of(build_parser().parse_args(["stream", "reader"])).split(".")[0]
    top, _ = _graph()
    reached = set().union(*(reachable(m, lambda n: top.get(n, ())) for m in ("seam", "seam.cli", module)))
    assert module == "seam.cli.stream_reader" and "seam.source.streaming" in reached
    assert not reached & {"seam.cli.stream_parts", "seam.apply.sink", "seam.load_run"}, sorted(reached)
