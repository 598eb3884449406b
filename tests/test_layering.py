"""The import rule (issue 17): methods are one-way plugins of the core.

Read from every .py file's syntax tree (not grepped, so comments and docstrings do not count):
(a) nothing outside papers/ imports ``embody.papers`` (nor names it in a string, as an ``import_module``
or ``"module:attr"`` entry point would); core tests outside tests/papers/ included, so the core's tests run
on a tree without papers/. setup.py's entry-point strings are the one allowed mention (not a module);
(b) no paper imports another paper; (c) papers use the core's public names only: no ``_private`` name,
attribute or module of the core (the core may rename those freely).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPERS = "embody.papers"
NAMES_PAPERS = re.compile(r"^embody\.papers(?=$|[.:])")  # a module or entry-point string naming papers


def package_folders() -> dict[str, str]:
    """setup.py's ROOTS (package -> folder), read from its syntax tree so a new folder is checked too."""
    for node in ast.walk(ast.parse((ROOT / "setup.py").read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no ROOTS = {...}")


FOLDERS = package_folders()


def module_name(path: Path) -> str | None:
    """``papers/mpa/train.py`` -> ``embody.papers.mpa.train``; None for files outside the package."""
    rel = path.relative_to(ROOT)
    # the longest folder first: "embody" must not claim "embody/..." files of a nested root (none today)
    for package, folder in sorted(FOLDERS.items(), key=lambda kv: -len(kv[1])):
        if rel.parts[: len(Path(folder).parts)] == Path(folder).parts:
            parts = [package, *rel.with_suffix("").parts[len(Path(folder).parts) :]]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


CORE_MODULES = {m for p in python_files(*(f for k, f in FOLDERS.items() if k != PAPERS)) if (m := module_name(p))}


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def core_private(dotted: str) -> str | None:
    """The first private component after the longest core-module prefix of ``dotted`` (or of a core
    module's own path: ``embody.datasets._video``), else None."""
    parts = dotted.split(".")
    if parts[0] != "embody" or dotted == PAPERS or dotted.startswith(PAPERS + "."):
        return None
    for i, part in enumerate(parts[1:], 1):
        if is_private(part):
            return part
        if ".".join(parts[: i + 1]) not in CORE_MODULES:
            return None  # past the modules we know: an attribute, checked once, then stop
    return None


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, tree: ast.Module):
    """(line, module imported, names taken from it or None, alias bindings) for each import in ``tree``
    (the file ``path``); relative imports resolved against the file's own module."""
    this = module_name(path) or ""
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, None, {a.asname or a.name.split(".")[0]: a.asname and a.name}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            yield (
                node.lineno,
                base,
                [a.name for a in node.names],
                {a.asname or a.name: f"{base}.{a.name}" for a in node.names},
            )


def targets(module: str, names: list[str] | None) -> list[str]:
    """Every dotted name an import reaches: ``from embody import papers`` reaches ``embody.papers``."""
    return [module] if names is None else [module] + [f"{module}.{n}" for n in names if n != "*"]


def strings(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMES_PAPERS.match(node.value):
            yield node.lineno, node.value


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def report(what: str, offences: list[str]) -> str:
    return f"{what}:\n  " + "\n  ".join(offences)


def test_scanner_sees_the_tree():
    # Guards the test itself: a wrong ROOT or mapping would find nothing and pass vacuously.
    assert "embody.cli" in CORE_MODULES and "embody.datasets.format" in CORE_MODULES
    assert module_name(ROOT / "papers/mpa/plugin.py") == "embody.papers.mpa.plugin"
    assert module_name(ROOT / "robots/__init__.py") == "embody.robots"
    assert core_private("embody.datasets.format._x") == "_x" and core_private("embody.datasets.format.load") is None


def papers_imported(path: Path, tree: ast.Module, papers: tuple[str, ...] = (PAPERS,)) -> list[str]:
    """Where ``tree`` imports or names (a string) ``embody.papers`` or, given ``papers``, those papers."""

    def hit(t: str) -> bool:
        return t in papers or t.startswith(tuple(p + sep for p in papers for sep in ".:"))

    offences = []
    for line, module, names, _ in imports(path, tree):
        offences += [f"{rel(path)}:{line}: imports {t}" for t in targets(module, names) if hit(t)][:1]
    return offences + [f"{rel(path)}:{line}: names {text!r}" for line, text in strings(tree) if hit(text)]


def dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None unless the chain starts at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def private_uses(path: Path, tree: ast.Module) -> list[str]:
    """Where ``tree`` imports a private name or module of the core, or reaches one as an attribute of an
    imported core module (``tasks._helper`` after ``from embody.sims import tasks``)."""
    offences = []
    bound: dict[str, str] = {}  # local name -> the core module (or a name in one) it stands for
    for line, module, names, binds in imports(path, tree):
        offences += [
            f"{rel(path)}:{line}: imports {t} (private {p})" for t in targets(module, names) if (p := core_private(t))
        ][:1]
        # `import embody.x` binds "embody" (value None: itself); `import embody.x as m` binds m -> embody.x
        bound.update({k: v or k for k, v in binds.items() if (v or k).split(".")[0] == "embody"})
    nodes = list(ast.walk(tree))
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # whole chains only, once
    for node in nodes:
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = dotted(node)
            if chain and chain[0] in bound:
                full = ".".join([bound[chain[0]], *chain[1:]])
                if p := core_private(full):
                    offences.append(f"{rel(path)}:{node.lineno}: uses {full} (private {p})")
    return offences


def test_the_checks_catch_each_form():
    # Guards the checks themselves: each form the rule names, written as a paper (or core file) would.
    paper = ROOT / FOLDERS[PAPERS] / "mpa" / "example.py"
    code = ast.parse("""
from embody.datasets._video import encode
from embody.datasets.format import _check, load
from embody.sims import tasks
import embody.datasets.format as fmt
import embody.robots
from .. import unidomain
from embody.papers.blindfolded import peg
tasks._helper(load, fmt._x, embody.robots._registry, fmt.load, tasks.TASKS)
ep = "embody.papers.unidomain.cli:main"
""")
    assert [o.split(": ", 1)[1] for o in private_uses(paper, code)] == [
        "imports embody.datasets._video (private _video)",
        "imports embody.datasets.format._check (private _check)",
        "uses embody.sims.tasks._helper (private _helper)",
        "uses embody.datasets.format._x (private _x)",
        "uses embody.robots._registry (private _registry)",
    ]
    others = (f"{PAPERS}.unidomain", f"{PAPERS}.blindfolded")
    assert [o.split(": ", 1)[1] for o in papers_imported(paper, code, others)] == [
        "imports embody.papers.unidomain",
        "imports embody.papers.blindfolded",
        "names 'embody.papers.unidomain.cli:main'",
    ]
    core = ROOT / "embody" / "example.py"
    code = ast.parse("from embody import papers\nfrom . import papers\nimportlib.import_module('embody.papers.mpa')")
    assert [o.split(": ", 1)[1] for o in papers_imported(core, code)] == [
        "imports embody.papers",
        "imports embody.papers",
        "names 'embody.papers.mpa'",
    ]


def test_core_and_core_tests_never_import_papers():
    files = python_files(*(f for k, f in FOLDERS.items() if k != PAPERS), "tests", "scripts")
    skip = ("tests/papers/", f"{FOLDERS[PAPERS]}/", rel(Path(__file__)))  # this file names papers in its checks
    files = [p for p in files if not rel(p).startswith(skip)]
    assert len(files) > 100
    offences = [o for p in files for o in papers_imported(p, parse(p))]
    assert not offences, report("the core (and its tests) must not import the methods in papers/", offences)


def paper_files() -> dict[str, list[Path]]:
    root = ROOT / FOLDERS[PAPERS]
    return {d.name: python_files(rel(d)) for d in sorted(root.iterdir()) if (d / "__init__.py").is_file()}


def test_no_paper_imports_another():
    papers = paper_files()
    assert {"unidomain", "mpa", "blindfolded"} <= set(papers)
    offences = [
        o
        for name, files in papers.items()
        for p in files
        for o in papers_imported(p, parse(p), tuple(f"{PAPERS}.{x}" for x in papers if x != name))
    ]
    assert not offences, report("a paper must not import another paper", offences)


def test_papers_use_only_public_names_of_the_core():
    offences = [o for files in paper_files().values() for p in files for o in private_uses(p, parse(p))]
    assert not offences, report("papers must use only the core's public names", offences)
