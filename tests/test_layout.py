"""The layers stay apart: a newcomer finds each concept in one place, and library code
can be called without a terminal."""

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jabcli"
IO_LAYER = {"cli", "display", "notebook", "__main__", "interrupt", "pipes", "worker"}


def imports_of(path: Path) -> set[str]:
    """The jabcli modules and the outside packages `path` imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "jabcli":
                found.update(f"jabcli.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def modules() -> dict[str, set[str]]:
    return {path.stem: imports_of(path) for path in PACKAGE.glob("*.py")}


def test_no_module_of_jab_imports_itself_back_through_another():
    graph = {
        name: {m.split(".")[1] for m in found if m.startswith("jabcli.")}
        for name, found in modules().items()
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    circles = [name for name in graph if reaches(name, name, {name})]
    assert circles == []


def test_only_the_command_line_layer_draws_with_rich_or_exits():
    for name, found in modules().items():
        if name in IO_LAYER:
            continue
        assert not any(m == "rich" or m.startswith("rich.") for m in found), name
        source = (PACKAGE / f"{name}.py").read_text()
        assert "sys.exit" not in source and not re.search(r"\bprint\(", source), name


def test_the_config_knows_nothing_of_tasks_models_or_jax():
    found = modules()["config"]
    assert not found & {"jax", "jabcli.tasks", "jabcli.model", "jabcli.positions"}


def test_every_module_opens_with_a_docstring_saying_what_it_owns():
    for path in PACKAGE.glob("*.py"):
        if path.stem in ("__init__", "__main__"):
            continue
        assert ast.get_docstring(ast.parse(path.read_text())), path.name


def test_the_python_api_and_the_notebook_draw_without_rich():
    found = modules()
    assert not any(m == "rich" or m.startswith("rich.") for m in found["api"] | found["notebook"])
    assert "jabcli.display" not in found["notebook"]  # shared words are formatting.py's


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
    from jabcli import positions

    kinds = {
        name
        for name, value in vars(positions).items()
        if isinstance(value, type) and issubclass(value, positions.PositionalScheme)
    } - {"PositionalScheme"}
    source = (PACKAGE / "experiment.py").read_text()
    assert kinds and not [kind for kind in kinds if re.search(rf"\b{kind}\b", source)]
    assert not re.search(r"\.coupled\b", source)  # what a scheme does is its own business
    registered = {type(scheme).__name__ for scheme in positions.SCHEMES.values()}
    assert registered <= kinds and len(positions.SCHEMES) == len(registered)
