"""The layers stay apart: a newcomer finds each concept by its folder, imports run one way,
down the layers, and library code can be called without a terminal."""

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jabcli"
# jabcli's folders, bottom to top: a module imports from its own layer and the layers
# below it, never from one above. `jabcli/__init__.py` and `__main__.py` stand above all.
LAYERS = (
    "core",
    "tasks",
    "model",
    "experiment",
    "evaluation",
    "runs",
    "training",
    "inspection",
    "studies",
    "api",
    "cli",
)
IO_LAYER = "cli"  # the only layer that prints, draws with Rich or exits


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The modules `path` imports, jab's and outside packages', at any depth (in functions
    and under TYPE_CHECKING too); `from jabcli.core import config` counts as
    `jabcli.core.config`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import"
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def modules() -> dict[str, set[str]]:
    """Every module of jab by its dotted name, with the modules it imports."""
    return {module_name(path): imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def graph(root: bool = False) -> dict[str, set[str]]:
    """Which of jab's own modules each one imports (`jabcli` itself, which only hands on the
    version and the API's names, imported lazily, is left out as a target unless `root`)."""
    found = modules()
    left_out = () if root else ("jabcli",)
    return {
        name: {m for m in imported if m in found and m != name and m not in left_out}
        for name, imported in found.items()
    }


def layer(name: str) -> int:
    """A module's rank: its layer's place in LAYERS, the top-level modules above them all."""
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def reached(name: str, edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Every module `name` imports, directly or through others, with one chain leading there."""
    paths, todo = {name: [name]}, [name]
    while todo:
        here = todo.pop()
        for nxt in sorted(edges[here]):
            if nxt not in paths:
                paths[nxt] = [*paths[here], nxt]
                todo.append(nxt)
    del paths[name]
    return paths


def rich_users() -> set[str]:
    return {
        name
        for name, found in modules().items()
        if any(m == "rich" or m.startswith("rich.") for m in found)
    }


def test_every_module_lives_in_the_folder_of_its_layer():
    names = set(modules())
    loose = {n for n in names if layer(n) == len(LAYERS)} - {"jabcli", "jabcli.__main__"}
    assert loose == set()
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS)
    assert {f"jabcli.{name}" for name in LAYERS} <= names  # each folder a package


def test_imports_run_one_way_down_the_layers_through_every_chain():
    edges = graph()
    upward = [
        " -> ".join(chain)
        for name in edges
        for target, chain in reached(name, edges).items()
        if layer(target) > layer(name)
    ]
    assert upward == []


def test_no_module_of_jab_imports_itself_back_through_another_the_package_itself_included():
    edges = graph(root=True)
    circles = [
        " -> ".join([*chain, name])
        for name in edges
        for chain in [[name], *reached(name, edges).values()]
        if name in edges[chain[-1]]
    ]
    assert circles == []


def test_the_layers_import_each_other_in_no_circle():
    edges = graph()
    between = {
        layer(a): {layer(b) for b in found if layer(b) != layer(a)} for a, found in edges.items()
    }
    for rank in between:
        todo, seen = list(between[rank]), set()
        while todo:
            nxt = todo.pop()
            assert nxt != rank, LAYERS[rank]
            if nxt not in seen:
                seen.add(nxt)
                todo.extend(between.get(nxt, ()))


def test_only_the_command_line_layer_draws_with_rich_or_exits_even_through_another_module():
    edges, drawing = graph(), rich_users()
    for name in edges:
        if name.startswith(f"jabcli.{IO_LAYER}") or layer(name) == len(LAYERS):
            continue
        assert name not in drawing, name
        assert not drawing & set(reached(name, edges)), name
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        source = path.read_text()
        assert "sys.exit" not in source and not re.search(r"\bprint\(", source), name


def test_the_config_knows_nothing_of_tasks_models_or_jax():
    found, edges = modules(), graph()
    below = {"jabcli.core.config", *reached("jabcli.core.config", edges)}
    assert all(layer(name) == LAYERS.index("core") for name in below), below
    assert not any(m == "jax" or m.startswith("jax.") for name in below for m in found[name])


def test_every_module_of_jab_imports_on_this_python():
    """Run on each Python that pyproject.toml claims (.ci/run runs it on 3.10 too): a name
    the standard library gained later (typing.NotRequired, 3.11) fails here."""
    import importlib

    for name in modules():
        importlib.import_module(name)


def test_every_module_opens_with_a_docstring_saying_what_it_owns():
    for path in PACKAGE.rglob("*.py"):
        assert ast.get_docstring(ast.parse(path.read_text())), path


def test_the_python_api_and_the_notebook_draw_without_rich():
    found = modules()
    api, notebook = found["jabcli.api.api"], found["jabcli.api.notebook"]
    assert not any(m == "rich" or m.startswith("rich.") for m in api | notebook)
    edges = graph()
    # shared words are formatting.py's
    reached_by_notebook = set(reached("jabcli.api.notebook", edges))
    assert not any(name.startswith("jabcli.cli.") for name in reached_by_notebook)
    assert not rich_users() & reached_by_notebook


def test_the_code_passes_the_projects_lint_and_format():
    root = PACKAGE.parent
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "jabcli", "tests", "benchmarks"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_experiment_names_no_positional_scheme_every_scheme_is_one_class_and_one_entry():
    from jabcli.model import positions

    kinds = {
        name
        for name, value in vars(positions).items()
        if isinstance(value, type) and issubclass(value, positions.PositionalScheme)
    } - {"PositionalScheme"}
    source = "".join(
        (PACKAGE / "experiment" / name).read_text() for name in ("experiment.py", "resolve.py")
    )
    assert kinds and not [kind for kind in kinds if re.search(rf"\b{kind}\b", source)]
    assert not re.search(r"\.coupled\b", source)  # what a scheme does is its own business
    registered = {type(scheme).__name__ for scheme in positions.SCHEMES.values()}
    assert registered <= kinds and len(positions.SCHEMES) == len(registered)


def test_jab_imports_no_private_module_of_another_package():
    private = {
        (name, imported)
        for name, found in modules().items()
        for imported in found
        if not imported.startswith("jabcli")
        and any(part.startswith("_") for part in imported.split(".")[1:])
    }
    assert private == set()


def test_the_tests_of_each_layer_sit_in_a_folder_named_for_it():
    """tests/ mirrors jabcli/: a layer's tests in tests/LAYER/, named for the module they
    check (test_checkpoints.py for training/checkpoints.py); only what checks the whole
    package (its layout, its docs) sits at the top, beside the shared fixtures."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders <= set(LAYERS), sorted(folders - set(LAYERS))
    for path in tests.rglob("test_*.py"):
        assert path.parent == tests or path.parent.parent == tests, path
    at_top = sorted(p.name for p in tests.glob("test_*.py"))
    assert at_top == ["test_docs.py", "test_layout.py"], at_top


def test_every_module_of_jab_stays_within_450_lines():
    """One job a module: a module past 450 lines has grown a second one (split it where
    the jobs part, as training/ and studies/ were)."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 450}  # fmt: skip
    assert not long, long
