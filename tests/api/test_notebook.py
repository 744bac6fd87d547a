"""The example notebook, examples/tour.ipynb: it runs top to bottom in a fresh kernel,
and the copy in the repository shows its pictures to a reader who does not run it."""

import shutil
from pathlib import Path

import nbclient
import nbformat

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.ipynb"


SMALLER = {
    "STEPS = 300": "STEPS = 40",
    '"train.eval_samples": 128': '"train.eval_samples": 16',
    "samples=50": "samples=4",
    '"train.log_every": 10,': '"train.log_every": 10, "model.num_layers": 1, "model.d_model": 16,',
}


def kinds(notebook) -> list[set[str]]:
    """The kinds of output (MIME types) of each code cell."""
    return [
        {kind for output in cell.outputs for kind in output.get("data", {})}
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def test_the_tour_notebook_runs_headless_twice_and_shows_progress_curves_table_and_heatmap(
    tmp_path,
):
    shutil.copy(TOUR, tmp_path / "tour.ipynb")
    notebook = nbformat.read(tmp_path / "tour.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []  # nothing left over from the committed copy
            # What is tested is that every cell runs and shows itself, not how well
            # 300 steps of the preset's model learn or what 128 and 50 inputs a length
            # measure: 40 steps of a one-layer model and a few inputs do.
            for measured, smaller in SMALLER.items():
                cell.source = cell.source.replace(measured, smaller)
    code = "".join(cell.source for cell in notebook.cells)
    assert all(smaller in code for smaller in SMALLER.values())
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)  # raises CellExecutionError, with the traceback
        shown = kinds(notebook)
        assert "text/html" in shown[1]  # training's progress, updated in place
        assert "image/svg+xml" in shown[2]  # the held-out exact-match curve
        assert (tmp_path / "runs/tour-reverse/metrics.jsonl").exists()
        html = "".join(
            output["data"].get("text/html", "")
            for cell in notebook.cells
            if cell.cell_type == "code"
            for output in cell.outputs
            if "data" in output
        )
        assert "<progress" in html and "exact match" in html and 'title="' in html
        # Run All a second time in the same kernel, as a reader does: up to training, in
        # the same folder.
        for index, cell in enumerate(notebook.cells[:4]):
            client.execute_cell(cell, index)
    assert "<progress" in "".join(
        output["data"].get("text/html", "")
        for output in notebook.cells[3].outputs
        if "data" in output
    )


def test_the_committed_tour_notebook_shows_its_outputs_without_being_run():
    shown = kinds(nbformat.read(TOUR, as_version=4))
    assert sum("image/svg+xml" in one for one in shown) >= 2  # curves
    assert sum("text/html" in one for one in shown) >= 4  # progress, table, answers, heatmap
