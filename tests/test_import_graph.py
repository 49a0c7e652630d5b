"""The import graph of sbd_core (issue 27): no circle and no module importing another module's private name. Read
from the source with ast (every import, module-level or inside a function; imports under ``if TYPE_CHECKING:`` are
annotations only and left out)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    out = {}
    for file in (ROOT / "sbd_core").rglob("*.py"):
        parts = file.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return out


def _imports(name: str, file: Path, modules: dict) -> tuple[set[str], list[str]]:
    """The sbd_core modules ``name`` imports, and the private names it imports from them."""
    tree = ast.parse(file.read_text())
    typing_only = {id(n) for top in ast.walk(tree) if isinstance(top, ast.If)
                   and getattr(top.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(top)}
    targets, private = set(), []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = name.split(".") if file.name == "__init__.py" else name.split(".")[:-1]
            source = (".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
                      if node.level else node.module or "")
            if not source.startswith("sbd_core"):
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                targets.add(target)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    private.append(f"{name} imports {alias.name} from {source}")
        elif isinstance(node, ast.Import):
            targets |= {a.name for a in node.names if a.name in modules}
    return targets - {name}, private


@pytest.fixture(scope="module")
def graph():
    modules = _modules()
    return modules, {name: _imports(name, file, modules) for name, file in modules.items()}


def test_no_module_imports_a_private_name(graph):
    _, imports = graph
    assert [p for _, (_, private) in imports.items() for p in private] == []


def test_no_import_circle(graph):
    _, imports = graph
    edges = {name: targets for name, (targets, _) in imports.items()}
    done, path = set(), []

    def visit(node):
        if node in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(node):] + [node]))
        if node in done:
            return
        path.append(node)
        for target in sorted(edges.get(node, ())):
            visit(target)
        path.pop()
        done.add(node)
    for name in sorted(edges):
        visit(name)
    assert len(done) == len(edges) > 100
