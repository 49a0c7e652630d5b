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


def _longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain (modules, importer first) of an acyclic graph."""
    memo: dict[str, list[str]] = {}

    def chain(node, path=()):
        if node in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(node):] + (node,)))
        if node not in memo:
            memo[node] = [node] + max((chain(t, path + (node,)) for t in sorted(edges.get(node, ())) if t in edges),
                                      key=len, default=[])
        return memo[node]
    return max((chain(n) for n in sorted(edges)), key=len)


def test_no_import_circle(graph):
    _, imports = graph
    edges = {name: targets for name, (targets, _) in imports.items()}
    _longest_chain(edges)  # raises naming the circle
    assert len(edges) > 100


def test_packages_form_layers(graph):
    """Folded onto sbd_core's top-level modules and packages (``sbd_core.report.*`` -> ``sbd_core.report``), the
    graph has no circle either: each package sits in a layer and imports only from layers below it."""
    modules, imports = graph
    top = {name: ".".join(name.split(".")[:2]) for name in modules}
    edges: dict[str, set[str]] = {}
    for name, (targets, _) in imports.items():
        edges.setdefault(top[name], set()).update(top[t] for t in targets if top[t] != top[name])
    longest = _longest_chain(edges)
    assert longest[0] == "sbd_core.__main__" and len(longest) <= 10, longest


def test_import_chains_are_shallower_than_before_the_redesign(graph):
    """Issue 27: the longest chain of imports was 15 modules deep at 51c3cbb (counted this way: package
    ``__init__`` modules are nodes, imports inside functions count); it must stay below that."""
    _, imports = graph
    longest = _longest_chain({name: targets for name, (targets, _) in imports.items()})
    assert len(longest) < 15, " -> ".join(longest)
