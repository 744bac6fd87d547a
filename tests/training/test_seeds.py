"""Several seeds in one process: `jab train --seeds N` trains N models side by side into
a group folder with one complete run per seed, and every report shows the spread."""

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from jabrun import TINY, interrupt_after, jab_here

GROUP = [*TINY, "--seeds", "3", "--steps", "150", "--set", "train.log_every=25"]


def records(run: Path) -> list[dict]:
    timing = {"steps_per_sec", "elapsed_s"}
    return [
        {k: v for k, v in json.loads(line).items() if k not in timing}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]


def arrays(run: Path) -> dict[str, np.ndarray]:
    manifest = json.loads((run / "checkpoints/manifest.json").read_text())
    data = (run / "checkpoints" / manifest["checkpoints"][-1]["file"]).read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """A folder holding `g`: a group of 3 tiny copy models (seeds 0-2) trained together."""
    cwd = tmp_path_factory.mktemp("seeds")
    jab_here("train", *GROUP, "--out", "g", cwd=cwd)
    return cwd


def test_a_group_holds_one_complete_run_per_seed_each_trained_differently(group):
    seeds = [group / "g" / f"seed-{n}" for n in range(3)]
    assert sorted(p.name for p in (group / "g").iterdir()) == [
        "group.json",
        "seed-0",
        "seed-1",
        "seed-2",
    ]
    assert json.loads((group / "g/group.json").read_text())["seeds"] == [0, 1, 2]
    losses = [[r["loss"] for r in records(run)] for run in seeds]
    assert all(len(one) == 6 for one in losses)  # 150 steps, a record every 25
    assert losses[0] != losses[1] != losses[2] != losses[0]
    first = [arrays(run) for run in seeds]
    name = next(k for k in first[0] if k.startswith("params"))
    assert not np.array_equal(first[0][name], first[1][name])
    for n, run in enumerate(seeds):  # each seed is a plain run of its own
        assert f"seed: {n}" in (run / "config.yaml").read_text()
        jab_here("predict", "0123", "--run", run, cwd=group)


def test_seeds_1_trains_bitwise_the_run_without_seeds(trained, tmp_path):
    jab_here("train", *TINY, "--steps", "300", "--seeds", "1", "--out", "one", cwd=tmp_path)
    assert records(tmp_path / "one") == records(trained / "runs/tiny")
    plain, one = arrays(trained / "runs/tiny"), arrays(tmp_path / "one")
    assert plain.keys() == one.keys()
    assert all(np.array_equal(plain[k], one[k]) for k in plain)


def test_a_group_interrupted_and_resumed_ends_bitwise_equal_to_an_uninterrupted_one(
    group, tmp_path
):
    # Ctrl-C at step 50 of 150: four 25-step chunks are left, so the signal lands mid-run
    code, _out, err = interrupt_after(
        ["train", *GROUP, "--out", "cut"], tmp_path, Path("cut/seed-2"), 2
    )
    assert code == 130, err
    assert len(records(tmp_path / "cut/seed-2")) < 6  # it really stopped part-way
    resumed = jab_here("resume", "cut", cwd=tmp_path)
    assert "Resuming cut from step" in resumed.stdout
    for n in range(3):
        whole, cut = group / "g" / f"seed-{n}", tmp_path / "cut" / f"seed-{n}"
        assert records(cut) == records(whole)
        a, b = arrays(whole), arrays(cut)
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_eval_of_a_group_reports_the_median_and_every_seed(group):
    result = json.loads(
        jab_here("eval", "--run", "g", "--samples", "100", "--json", cwd=group).stdout
    )
    seeds = [one["seq_acc"] for one in result["seeds"]]
    assert [Path(one["run"]).name for one in result["seeds"]] == ["seed-0", "seed-1", "seed-2"]
    assert result["seq_acc"] == float(np.median(seeds))
    assert result["seq_acc_range"] == [min(seeds), max(seeds)]
    assert set(result["per_length"]) == {str(n) for n in range(1, 6)}
    one = json.loads(
        jab_here("eval", "--run", "g/seed-1", "--samples", "100", "--json", cwd=group).stdout
    )
    assert one["seq_acc"] == seeds[1] and "seeds" not in one


def test_eval_and_compare_print_a_groups_median_and_spread(group):
    shown = jab_here(
        "compare", "g", "g/seed-0", "--lengths", "1-6", "--samples", "20", cwd=group
    ).stdout
    assert "3 seeds" in shown and "median [min-max]" in shown
    shown = jab_here("eval", "--run", "g", "--samples", "100", cwd=group).stdout
    assert "median [min-max] over seeds" in shown and "seed-2" in shown


def test_runs_lists_a_group_as_one_row_with_each_seeds_best(group):
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=group).stdout)
    assert (row["run"], row["seeds"], row["step"], row["steps"]) == ("g", 3, 150, 150)
    assert len(row["best_eval_seq_acc"]) == 3


def test_seeds_that_share_no_checkpoint_step_are_refused_and_nothing_is_deleted(group, tmp_path):
    """What a kill between two seeds' saves can leave with train.keep_checkpoints=1."""
    shutil.copytree(group / "g", tmp_path / "g")
    for seed, keep in ((0, 150), (1, 100)):
        path = tmp_path / f"g/seed-{seed}/checkpoints/manifest.json"
        manifest = json.loads(path.read_text())
        manifest["checkpoints"] = [e for e in manifest["checkpoints"] if e["step"] == keep]
        path.write_text(json.dumps(manifest))
    before = sorted(p.name for p in (tmp_path / "g").rglob("*.npz"))
    result = jab_here("resume", "g", "--steps", "300", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "share no checkpoint step (seed-0: 150; seed-1: 100; seed-2: 100, 150)" in result.stderr
    assert sorted(p.name for p in (tmp_path / "g").rglob("*.npz")) == before
    assert "steps: 150" in (tmp_path / "g/seed-0/config.yaml").read_text()


def test_a_group_given_where_one_run_is_needed_names_a_seed(group):
    result = jab_here("predict", "0123", "--run", "g", cwd=group, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "jab: error: g is a group of 3 seeds; name one of them, for example g/seed-0"
    )


@pytest.mark.parametrize(
    "seeds, message",
    [
        ("0", "Invalid value for '--seeds'"),
        ("two", "Invalid value for '--seeds'"),
        ("100000000", "lower train.seeds"),
    ],
)
def test_a_bad_number_of_seeds_is_one_line_and_writes_nothing(tmp_path, seeds, message):
    result = jab_here("train", *TINY, "--seeds", seeds, "--out", "never", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert not (tmp_path / "never").exists()


def test_eval_of_a_group_shows_the_mistakes_of_each_seed_that_made_some(group):
    result = json.loads(
        jab_here("eval", "--run", "g", "--samples", "100", "--json", cwd=group).stdout
    )
    wrong = [Path(one["run"]).name for one in result["seeds"] if one["mistakes"]]
    assert wrong, "the tiny group should make mistakes after 150 steps"
    shown = jab_here("eval", "--run", "g", "--samples", "100", cwd=group).stdout
    assert all(f"Some mistakes of {name}" in shown for name in wrong)
    assert "No mistakes." not in shown


def test_compare_tells_apart_runs_whose_folders_end_alike(group, tmp_path):
    shutil.copytree(group / "g", tmp_path / "a")
    shutil.copytree(group / "g", tmp_path / "b")
    shown = jab_here("compare", "a/seed-0", "b/seed-0", "--lengths", "2-3", "--samples", "5",
                cwd=tmp_path).stdout  # fmt: skip
    assert "a/seed-0" in shown and "b/seed-0" in shown


@pytest.mark.parametrize("columns", ["80", "40"])
def test_a_groups_tables_at_narrow_widths_cut_and_split_no_figure(group, columns):
    def shown(*args) -> str:
        return jab_here(*args, cwd=group, columns=int(columns)).stdout

    out = shown("eval", "--run", "g", "--lengths", "4-6", "--force-length", "--samples", "20")
    result = json.loads(
        shown("eval", "--run", "g", "--lengths", "4-6", "--force-length", "--samples", "20",
              "--json")
    )  # fmt: skip
    words = out.split()
    for length, row in result["per_length"].items():
        low, high = row["seq_acc_range"]
        assert f"[{100 * low:.1f}%-{100 * high:.1f}%]" in " ".join(words), length
        assert length in words or f"{length}:" in words
    for text in (out, shown("runs", "."), shown("tasks")):
        assert "…" not in text
        assert not [
            w for w in text.split() if w.startswith("[") and not w.rstrip(",").endswith("]")
        ]


def test_a_group_resume_says_which_step_it_resumes_from_and_what_it_drops(group, tmp_path):
    shutil.copytree(group / "g", tmp_path / "g")
    path = tmp_path / "g/seed-0/checkpoints/manifest.json"
    manifest = json.loads(path.read_text())
    manifest["checkpoints"] = [e for e in manifest["checkpoints"] if e["step"] != 150]
    path.write_text(json.dumps(manifest))
    resumed = jab_here("resume", "g", "--steps", "175", cwd=tmp_path)
    assert (
        "jab: note: resuming from step 100, the newest step at which every seed has a "
        "checkpoint; g/seed-1's checkpoints at step(s) 150 are dropped"
    ) in resumed.stderr.splitlines()
    assert "Resuming g from step 100" in resumed.stdout


def test_a_seed_whose_config_was_edited_is_refused_alike_by_eval_and_resume(group, tmp_path):
    from jabcli.core.errors import JabError
    from jabcli.inspection import inspection
    from jabcli.training import session

    shutil.copytree(group / "g", tmp_path / "g")
    config = tmp_path / "g/seed-1/config.yaml"
    config.write_text(config.read_text().replace("learning_rate: 0.0015", "learning_rate: 0.002"))
    for load in (
        lambda: inspection.load_runs(tmp_path / "g"),
        lambda: session.resume(tmp_path / "g", 300),
    ):
        with pytest.raises(JabError, match=r"seed-1/config.yaml differs from .*seed-0/config.yaml"):
            load()


def test_a_figure_over_an_even_number_of_seeds_is_the_mean_of_the_middle_two_everywhere():
    """The terminal's words, a study's table and a group's evaluation take one median
    (core/spread.py): two seeds at 50% and 100% are 75%, not the upper or lower middle."""
    from jabcli.api.formatting import spread as words
    from jabcli.core.spread import Spread
    from jabcli.inspection.inspection import combine

    assert words([0.5, 1.0]) == "75.0% [50.0%-100.0%]"
    assert Spread.of([0.5, 1.0]).record() == {"median": 0.75, "min": 0.5, "max": 1.0}
    seeds = [{"step": 10, "seq_acc": acc, "per_length": {"3": {"samples": 4, "seq_acc": acc}}}
             for acc in (1.0, 0.5)]  # fmt: skip
    both = combine("group", seeds)
    assert both["seq_acc"] == 0.75 and both["seq_acc_range"] == [0.5, 1.0]
    assert both["per_length"]["3"]["seq_acc"] == 0.75
