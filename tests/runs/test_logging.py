"""Training logs in TensorBoard and W&B hold what metrics.jsonl holds, read back by the
tools' own readers; a logger that breaks never stops training."""

import json
import os
import re
import struct

import pytest
from jabrun import TINY, jab_here

from jabcli.runs import loggers

pytest.importorskip("tensorboardX")
SHORT = [*TINY, "--steps", "60", "--set", "train.log_every=20", "--set", "train.eval_every=40"]


def metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def expected_scalars(run) -> dict[str, list[tuple[int, float]]]:
    """What a logger should have been given: each figure of metrics.jsonl by logged name."""
    found: dict[str, list[tuple[int, float]]] = {}
    for record in metrics(run):
        for name, value in loggers.scalars(record).items():
            found.setdefault(name, []).append((record["step"], value))
    return found


def tensorboard_scalars(run) -> dict[str, list[tuple[int, float]]]:
    """The scalars TensorBoard itself reads from a run folder's event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run))
    events.Reload()
    return {
        name: [(event.step, event.value) for event in events.Scalars(name)]
        for name in events.Tags()["scalars"]
    }


def assert_same(logged: dict, expected: dict) -> None:
    assert sorted(logged) == sorted(expected)
    for name, points in expected.items():
        assert [step for step, _ in logged[name]] == [step for step, _ in points], name
        for (_, got), (_, want) in zip(logged[name], points):
            assert got == pytest.approx(want, rel=1e-6), name


def test_tensorboard_logs_of_a_group_read_back_equal_to_each_seeds_metrics(tmp_path):
    jab_here(
        "train", *SHORT, "--seeds", "2", "--set", "train.log_to=tensorboard",
        "--out", "runs/g", cwd=tmp_path,
    )  # fmt: skip
    for seed in ("seed-0", "seed-1"):
        run = tmp_path / "runs" / "g" / seed
        expected = expected_scalars(run)
        assert {"train/loss", "train/seq_acc", "held_out/seq_acc", "train/lr"} <= set(expected)
        assert_same(tensorboard_scalars(run), expected)


def test_jab_export_writes_a_run_trained_without_logging_as_tensorboard_events(tmp_path):
    jab_here("train", *SHORT, "--out", "runs/plain", cwd=tmp_path)
    run = tmp_path / "runs" / "plain"
    assert not list(run.glob("events.out.tfevents.*"))
    for _ in range(2):  # a second export replaces the first
        result = jab_here("export", "runs/plain", "--tensorboard", cwd=tmp_path)
        assert "Wrote runs/plain/events.out.tfevents." in result.stdout
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    assert not list(run.glob(".export-*"))
    assert_same(tensorboard_scalars(run), expected_scalars(run))


def test_a_logger_that_breaks_warns_once_and_training_goes_on(tmp_path, monkeypatch):
    calls = []

    def broken(self, record):
        calls.append(record.step)
        raise OSError("disk full")

    monkeypatch.setattr(loggers.TensorBoard, "log", broken)
    result = jab_here("train", *SHORT, "--set", "train.log_to=tensorboard", "--out", "r",
                      cwd=tmp_path)  # fmt: skip
    assert calls == [20]  # stopped after its first failure
    warning = "warning: tensorboard logging stopped (disk full); training goes on"
    assert (result.stdout + result.stderr).count(warning) == 1
    assert [r["step"] for r in metrics(tmp_path / "r")] == [20, 40, 60]


def test_a_missing_logging_library_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setitem(loggers.EXTRAS, "wandb", ("no_such_module_jab", "wandb"))
    result = jab_here("train", *SHORT, "--set", "train.log_to=wandb", "--out", "r",
                      cwd=tmp_path, check=False)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "jab: error: train.log_to=wandb needs no_such_module_jab, which is not installed: "
        "pip install wandb"
    )
    assert not (tmp_path / "r").exists()


def test_an_unwritable_wandb_folder_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "nothere"))
    result = jab_here("train", *SHORT, "--set", "train.log_to=wandb", "--out", "r",
                      cwd=tmp_path, check=False)  # fmt: skip
    assert result.returncode == 2
    assert "WANDB_DIR=" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def wandb_records(path) -> list:
    """The records of an offline W&B run file: W&B's log format (LevelDB's), 32 KiB blocks
    of checksummed chunks, each a piece of one protobuf `Record`."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pieces, at, block = [], b"", 7, 32768
    while at + 7 <= len(data):
        if block - at % block < 7:  # a block's tail too short for a header is padding
            at += block - at % block
            continue
        _, length, kind = struct.unpack("<IHB", data[at : at + 7])
        pieces += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
            pieces = b""
    return records


def test_wandb_offline_run_holds_the_scalars_config_and_per_length_table(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    result = jab_here("train", *SHORT, "--set", "train.log_to=wandb", "--out", "r", cwd=tmp_path)
    assert "Logging to W&B offline in r/wandb" in result.stdout
    run = tmp_path / "r"
    (offline,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    records = wandb_records(offline)
    kinds = [record.WhichOneof("record_type") for record in records]
    history = [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json)
         for item in record.history.item}
        for record, kind in zip(records, kinds) if kind == "history"
    ]  # fmt: skip
    logged: dict[str, list] = {}
    for row in history:
        for name, value in row.items():
            scalar = isinstance(value, float | int) and "/per_length" not in name
            if name.startswith(("train/", "held_out/")) and scalar:
                logged.setdefault(name, []).append((row["_step"], value))
    assert_same(logged, expected_scalars(run))
    (config,) = [record.run.config for record, kind in zip(records, kinds) if kind == "run"]
    values = {item.key: json.loads(item.value_json) for item in config.update}
    assert values["model"]["d_model"] == 16 and values["train"]["log_to"] == "wandb"
    (table,) = [row for row in history if "held_out/per_length/_type" in row]
    assert table["held_out/per_length/nrows"] == 5  # lengths 1-5
    (saved,) = (run / "wandb").glob("offline-run-*/files/" + table["held_out/per_length/path"])
    assert json.loads(saved.read_text())["columns"] == ["length", "samples", "token_acc", "seq_acc"]
    assert os.path.getsize(offline) > 0


def test_logging_turned_on_in_a_runs_config_takes_effect_when_it_resumes(tmp_path):
    jab_here("train", *SHORT, "--out", "r", cwd=tmp_path)
    config = tmp_path / "r" / "config.yaml"
    config.write_text(config.read_text().replace("log_to: ''", "log_to: tensorboard"))
    assert "log_to: tensorboard" in config.read_text()
    jab_here("resume", "r", "--steps", "100", cwd=tmp_path)  # not refused as an edited config
    logged = tensorboard_scalars(tmp_path / "r")
    assert [step for step, _ in logged["train/loss"]] == [80, 100]


def test_a_run_logged_from_its_start_and_resumed_keeps_every_step_in_tensorboard(tmp_path):
    jab_here("train", *SHORT, "--set", "train.log_to=tensorboard,tensorboard", "--out", "r",
             cwd=tmp_path)  # fmt: skip
    assert loggers.names("tensorboard, tensorboard") == ["tensorboard"]  # one writer
    jab_here("resume", "r", "--steps", "100", cwd=tmp_path)
    run = tmp_path / "r"
    assert [r["step"] for r in metrics(run)] == [20, 40, 60, 80, 100]
    assert_same(tensorboard_scalars(run), expected_scalars(run))  # step 60 too


def test_a_resumed_group_continues_each_seeds_own_wandb_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))  # shared by every seed
    args = [*TINY, "--steps", "40", "--set", "train.log_every=20", "--seeds", "2"]
    jab_here("train", *args, "--set", "train.log_to=wandb", "--out", "g", cwd=tmp_path)
    ids = [(tmp_path / "g" / seed / loggers.ID_FILE).read_text() for seed in ("seed-0", "seed-1")]
    assert len(set(ids)) == 2
    before = sorted((tmp_path / "wandb").glob("offline-run-*"))
    jab_here("resume", "g", "--steps", "60", cwd=tmp_path)
    after = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(after) > len(before) == 2  # the resume logged, as each seed's own W&B run
    # offline-run-DATE_TIME-ID, and a "-1" after it where a resume started within the
    # same second as the run it continues
    assert {re.match(r"offline-run-\d+_\d+-([^-]+)", f.name)[1] for f in after} == set(ids)


def test_jab_export_refuses_a_run_that_is_being_written(tmp_path):
    from jabcli.runs.runs import Run

    jab_here("train", *SHORT, "--out", "r", cwd=tmp_path)
    with Run(tmp_path / "r").lock():  # as a training process holds it
        result = jab_here("export", "r", "--tensorboard", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "r is being written by another jab process" in result.stderr
    assert not list((tmp_path / "r").glob("events.out.tfevents.*"))
