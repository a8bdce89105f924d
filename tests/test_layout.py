"""Which part may import which (docs/architecture.md), checked on every module's imports as ast
reads them: a wrong arrow fails here even where a function-level import would still let it load.

    decoding  imports no other part (the engine: pure computation)
    models    imports decoding at most
    daemon    imports decoding and models, never lsp or cli
    lsp       imports only the daemon's client, protocol, config and figures, and
              decoding's errors: never the engine, never torch
    bench     (every measurement) imports any part but cli; only cli imports it
    cli       imports anything; nothing imports it
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("decoding", "models", "daemon", "lsp", "bench", "cli")  # folders, installed as specd.<part>
ALLOWED = {                                              # what each part may import of the others
    "decoding": set(),
    "models": {"decoding"},
    "daemon": {"decoding", "models"},
    "lsp": {"daemon.client", "daemon.protocol", "daemon.config", "daemon.figures",
            "decoding.errors"},
    "bench": {"decoding", "models", "daemon", "lsp"},
    "cli": {"decoding", "models", "daemon", "lsp", "bench"},
}
ENGINE_LIBRARIES = ("torch", "transformers", "accelerate", "gguf")
SKIP = {"node_modules", "build", "dist", "examples", "bench-out"}  # and hidden folders; examples: documents to
# complete; bench-out: what benchmarks wrote (other projects' files among it)


def sources() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIP and not name.startswith(".")]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


def imports(path: Path) -> list[tuple[str, int]]:
    """(dotted name, line) of every import in the file, at any depth; `from a import b` is `a.b`
    when a/b.py is a module, else `a`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import; write specd.<part>.<module>"
            found += [(_from_name(node.module, alias.name), node.lineno) for alias in node.names]
    return found


def _from_name(module: str, name: str) -> str:
    parts = module.split(".")
    if parts[0] == "specd" and len(parts) == 2 and (ROOT / parts[1] / f"{name}.py").exists():
        return f"{module}.{name}"
    return module


def part_of(path: Path) -> str | None:
    top = path.relative_to(ROOT).parts[0]
    return top if top in PARTS else None


def wrong_arrows(path: Path) -> list[str]:
    """What this file imports that its part may not (or, outside the parts, what nobody may)."""
    own = part_of(path)
    wrong = []
    for name, line in imports(path):
        where = f"{path.relative_to(ROOT)}:{line} imports {name}"
        top, _, rest = name.partition(".")
        if top in PARTS:
            wrong.append(f"{where}: a bare import; write specd.{name}")
        if top != "specd" or not rest:
            if own == "lsp" and top in ENGINE_LIBRARIES:
                wrong.append(f"{where}: the language server never loads the engine's libraries")
            continue
        target = rest.split(".")[0]
        if target == own:
            continue
        if target == "cli":
            wrong.append(f"{where}: nothing imports the command line")
        elif own is not None and not any(rest == a or rest.startswith(a + ".") for a in ALLOWED[own]):
            wrong.append(f"{where}: {own} may import only {', '.join(sorted(ALLOWED[own])) or 'itself'}")
    return wrong


def test_every_import_follows_the_arrows():
    wrong = [line for path in sources() for line in wrong_arrows(path)]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_every_part_and_each_kind_of_wrong_arrow(tmp_path, monkeypatch):
    """The rules above bite: a file per kind of wrong arrow, each reported."""
    assert {part_of(p) for p in sources()} >= {"decoding", "daemon", "lsp", "cli"}
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    cases = {"decoding/x.py": "from specd.daemon import config", "daemon/x.py": "import specd.lsp.server",
             "lsp/x.py": "from specd.decoding.engine import RequestError", "lsp/y.py": "import torch",
             "models/x.py": "from specd.daemon.paths import Paths", "tests/x.py": "from specd.cli.main import main",
             "daemon/y.py": "from daemon import protocol"}
    for name, line in cases.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(line + "\n")
    (tmp_path / "daemon" / "config.py").write_text("")
    for name in cases:
        assert wrong_arrows(tmp_path / name), f"{name}: {cases[name]!r} is a wrong arrow"
    (tmp_path / "lsp" / "ok.py").write_text("from specd.daemon import config\nimport specd.decoding.errors\n")
    assert not wrong_arrows(tmp_path / "lsp" / "ok.py")


@pytest.mark.parametrize("modules", [
    [f"specd.lsp.{p.stem}" for p in sorted((ROOT / "lsp").glob("*.py")) if p.stem != "__init__"],
    ["specd.cli.main"],   # every `specd` command builds the whole parser first
], ids=["lsp", "cli"])
def test_importing_loads_no_engine_library(modules):
    """Run for real: a fresh interpreter imports them, and no engine library is loaded."""
    code = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(ENGINE_LIBRARIES)!r}))")
    loaded = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", f"importing {modules} loads {loaded}"


def module_graph(paths: list[Path]) -> dict[str, set[str]]:
    """Each module (specd.<part>.<name>) and the modules it imports, at any depth of the file."""
    name = lambda p: "specd." + ".".join(p.relative_to(ROOT).with_suffix("").parts)  # noqa: E731
    known = {name(p) for p in paths if part_of(p) is not None}
    return {name(p): {m for m, _ in imports(p) if m in known and m != name(p)} for p in paths if name(p) in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import one another round a loop (Tarjan's strongly connected
    components of more than one module)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v), on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                on.discard(w), group.append(w)
            on.discard(v)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_one_another_round_a_loop():
    """Within a part too, arrows run one way (a function-level import counts: it hides the loop
    from Python, not from a reader)."""
    assert not cycles(module_graph(sources()))
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
