"""Checkpoints and their manifest (jabcli/training/checkpoints.py, manifest.py): a damaged,
edited or lost one is named in one line, every command falls back to the newest valid one,
and nothing is deleted."""

import json
import shutil
from pathlib import Path

import pytest
from damage import edit_config, newest_step, truncate
from jabrun import jab_here

from jabcli.core.errors import JabError


def test_eval_falls_back_past_a_truncated_checkpoint_and_names_it_in_one_line(
    three_checkpoints,
):
    truncate(three_checkpoints / "run", 300)
    result = jab_here("eval", "--run", "run", "--samples", "50", "--json", cwd=three_checkpoints)
    assert json.loads(result.stdout)["step"] == 200
    assert result.stderr == (
        "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); using step 200, the newest valid checkpoint\n"
    )


def test_predict_falls_back_to_the_newest_valid_checkpoint_and_says_so(three_checkpoints):
    truncate(three_checkpoints / "run", 300)
    for command in (["predict", "012"], ["show-attention", "--input", "012"]):
        result = jab_here(*command, "--run", "run", cwd=three_checkpoints)
        assert "012" in result.stdout
        (line,) = result.stderr.splitlines()
        assert line.startswith("jab: note: checkpoint run/checkpoints/step-00000300.npz")
        assert line.endswith("using step 200, the newest valid checkpoint")


def test_the_api_warns_of_a_damaged_checkpoint_it_passes_over(three_checkpoints):
    import jabcli as jab
    from jabcli.core.errors import Note

    truncate(three_checkpoints / "run", 300)
    with pytest.warns(Note, match="step-00000300.npz is corrupted .* using step 200"):
        predictions = jab.load(three_checkpoints / "run").predict(["012"])
    assert predictions[0]["output"] == "012"


def test_a_damaged_checkpoint_asked_for_by_step_is_one_error_naming_the_valid_steps(
    three_checkpoints,
):
    truncate(three_checkpoints / "run", 300)
    result = jab_here(
        "predict", "012", "--run", "run", "--checkpoint", "300", cwd=three_checkpoints, check=False
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "jab: error: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); valid checkpoints of run: step(s) 100, 200 (--checkpoint 200 for the "
        "newest)\n"
    )


def test_a_run_with_no_valid_checkpoint_left_is_one_error(three_checkpoints):
    for step in (100, 200, 300):
        truncate(three_checkpoints / "run", step)
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        "jab: error: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch), and run has no other valid checkpoint\n"
    )


def test_resume_falls_back_to_the_newest_valid_checkpoint_with_one_note_on_stderr_as_eval(
    three_checkpoints,
):
    newest = three_checkpoints / "run/checkpoints/step-00000300.npz"
    newest.write_bytes(b"garbage")
    result = jab_here("train", "--resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert result.stderr == (
        "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); falling back to an earlier checkpoint\n"
    )
    assert "falling back" not in result.stdout
    assert "Resuming run from step 200" in " ".join(result.stdout.split())
    steps = [
        json.loads(line)["step"]
        for line in (three_checkpoints / "run/metrics.jsonl").read_text().splitlines()
    ]
    assert steps == sorted(set(steps)) and steps[-1] > 200  # no step logged twice


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(vocab=c["vocab"][:-2] + c["vocab"][:-3:-1]),
        lambda c: c.pop("model"),
        lambda c: c["task"].update(alphabet="0132"),
    ],
    ids=["reordered-vocab", "model-section-removed", "alphabet-edited"],
)
def test_a_hand_edited_run_config_is_refused_naming_the_file(trained, tmp_path, change):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    edit_config(run, change)
    with pytest.raises(JabError, match=r"run/config.yaml was edited after checkpoint"):
        inspection.load(run)


def test_extending_steps_is_the_one_config_edit_a_checkpoint_accepts(trained, tmp_path):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    edit_config(run, lambda c: c["train"].update(steps=5000))
    assert inspection.load(run).step == 300


def test_a_hand_edited_manifest_step_is_refused(trained, tmp_path):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    manifest = json.loads((run / "checkpoints/manifest.json").read_text())
    manifest["checkpoints"][-1]["step"] = 999
    (run / "checkpoints/manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(JabError, match=r"manifest.json says .* step 999, but it holds step 300"):
        inspection.load(run)


def with_sha256(checkpoints: Path, name: str, data: bytes) -> None:
    """Replace a checkpoint's bytes and its checksum in the manifest alike."""
    import hashlib

    (checkpoints / name).write_bytes(data)
    manifest = json.loads((checkpoints / "manifest.json").read_text())
    for entry in manifest["checkpoints"]:
        if entry["file"] == name:
            entry["sha256"] = hashlib.sha256(data).hexdigest()
    (checkpoints / "manifest.json").write_text(json.dumps(manifest))


def test_junk_with_a_matching_checksum_is_corrupted_and_every_command_falls_back(
    three_checkpoints,
):
    with_sha256(three_checkpoints / "run/checkpoints", "step-00000300.npz", b"PK\x03\x04junk")
    for command in (
        ["eval", "--run", "run", "--samples", "50"],
        ["predict", "--run", "run", "012"],
    ):
        result = jab_here(*command, cwd=three_checkpoints)
        assert result.stderr == (
            "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (not a "
            "checkpoint file); using step 200, the newest valid checkpoint\n"
        )
    resumed = jab_here("resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert "Resuming run from step 200" in " ".join(resumed.stdout.split())


def test_a_lost_manifest_is_rebuilt_so_a_resume_goes_on_from_the_newest_checkpoint(
    three_checkpoints,
):
    (three_checkpoints / "run/checkpoints/manifest.json").unlink()
    before = (three_checkpoints / "run/checkpoints/step-00000200.npz").read_bytes()
    result = jab_here("resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert result.stderr == (
        "jab: note: run/checkpoints/manifest.json is missing, though run/checkpoints holds "
        "checkpoints; rebuilt it from the checkpoint files that pass their checks (steps 100, "
        "200, 300)\n"
    )
    said = " ".join(result.stdout.split())
    assert "Resuming run from step 300" in said  # not from 0, over the checkpoints
    assert (three_checkpoints / "run/checkpoints/step-00000200.npz").read_bytes() == before
    assert newest_step(three_checkpoints / "run") == 400


def test_a_corrupt_manifest_is_rebuilt_and_predict_still_answers(three_checkpoints):
    checkpoints = three_checkpoints / "run/checkpoints"
    before = json.loads((checkpoints / "manifest.json").read_text())
    (checkpoints / "manifest.json").write_text('{"format": 1, "checkpoi')
    listed = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    assert listed[0]["state"] == (
        "damaged: run/checkpoints/manifest.json is corrupted (not valid JSON); loading the "
        "run (jab eval, predict, resume) rebuilds it from its checkpoint files"
    )
    result = jab_here(
        "predict", "012", "--run", "run", "--checkpoint", "300", cwd=three_checkpoints
    )
    assert "012" in result.stdout
    assert result.stderr == (
        "jab: note: run/checkpoints/manifest.json is corrupted (not valid JSON); rebuilt it "
        "from the checkpoint files that pass their checks (steps 100, 200, 300); the damaged "
        "manifest is kept as manifest.json.damaged\n"
    )
    assert (checkpoints / "manifest.json.damaged").read_text() == '{"format": 1, "checkpoi'
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    same = ("file", "step", "sha256", "eval_seq_acc", "config")
    assert [{k: e[k] for k in same} for e in rebuilt["checkpoints"]] == [
        {k: e[k] for k in same} for e in before["checkpoints"]
    ]
    assert rebuilt["best"] == before["best"]
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    assert row["state"] == "finished"
    again = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert again.stderr == ""  # rebuilt once, for good


@pytest.mark.parametrize(
    "manifest, damage",
    [
        (
            {"format": 1, "checkpoints": [{"file": "step-00000400.npz", "step": 400,
                                           "sha256": "0" * 64}]},
            "lists step-00000400.npz, which is missing",
        ),
        ({"format": 2, "checkpoints": []}, "is corrupted (format 2, not 1)"),
        (
            {"format": 1, "checkpoints": [{"file": "step-00000300.npz", "step": "300",
                                           "sha256": "0" * 64}]},
            "is corrupted (unexpected contents)",
        ),
    ],
    ids=["lists-a-missing-file", "unknown-format", "step-not-a-number"],
)  # fmt: skip
def test_a_manifest_that_reads_but_disagrees_with_the_files_is_rebuilt_from_them(
    three_checkpoints, manifest, damage
):
    checkpoints = three_checkpoints / "run/checkpoints"
    (checkpoints / "manifest.json").write_text(json.dumps(manifest))
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert "012" in result.stdout
    assert result.stderr == (
        f"jab: note: run/checkpoints/manifest.json {damage}; rebuilt it from the checkpoint "
        "files that pass their checks (steps 100, 200, 300); the damaged manifest is kept as "
        "manifest.json.damaged\n"
    )
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    assert [e["step"] for e in rebuilt["checkpoints"]] == [100, 200, 300]
    assert json.loads((checkpoints / "manifest.json.damaged").read_text()) == manifest


def test_a_rebuilt_manifest_leaves_out_a_damaged_checkpoint_and_deletes_nothing(
    three_checkpoints,
):
    checkpoints = three_checkpoints / "run/checkpoints"
    (checkpoints / "manifest.json").unlink()
    data = bytearray((checkpoints / "step-00000300.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # flipped bits in an array: only its CRC-32 can tell
    (checkpoints / "step-00000300.npz").write_bytes(bytes(data))
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert result.stderr.endswith(
        "rebuilt it from the checkpoint files that pass their checks (steps 100, 200); "
        "step-00000300.npz fails them and is left unlisted, not deleted\n"
    )
    assert (checkpoints / "step-00000300.npz").read_bytes() == bytes(data)
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    assert [e["step"] for e in rebuilt["checkpoints"]] == [100, 200]


def test_a_lost_manifest_with_no_valid_checkpoint_beside_it_is_one_error_naming_the_way_out(
    three_checkpoints,
):
    (three_checkpoints / "run/checkpoints/manifest.json").write_text("")
    for step in (100, 200, 300):
        truncate(three_checkpoints / "run", step)
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        "jab: error: run/checkpoints/manifest.json is corrupted (not valid JSON), and no "
        "checkpoint file beside it passes its checks (step-00000100.npz, step-00000200.npz, "
        "step-00000300.npz); move run/checkpoints away to train anew\n"
    )
    assert not (three_checkpoints / "run/checkpoints/manifest.json.damaged").exists()
