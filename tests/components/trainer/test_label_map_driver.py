"""The Trainer's driver keys the local cache on the label map's content: a renamed class retrains."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from components.trainer.label_map_driver import (
    LABEL_MAP_FINGERPRINT_KEY,
    LabelMapDriver,
    label_map_fingerprint,
)
from pipeline.config import build_config
from pipeline.pipeline import create_pipeline


def test_the_fingerprint_follows_the_label_maps_content(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    config = json.dumps({"labels_path": str(labels), "trainer": {}})
    before = label_map_fingerprint(config)
    assert label_map_fingerprint(json.loads(config)) == before  # JSON text or the mapping
    labels.write_text("cat\nwolf\n")
    assert label_map_fingerprint(config) != before
    labels.unlink()
    assert label_map_fingerprint(config) == "unreadable"  # the Trainer then fails on it, naming the file
    assert label_map_fingerprint("{}") == label_map_fingerprint(None) == "none"


def test_the_driver_puts_it_into_the_execution_properties(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    info = SimpleNamespace(exec_properties={"custom_config": json.dumps({"labels_path": str(labels)})})
    output = LabelMapDriver(None).run(info)
    assert output.exec_properties[LABEL_MAP_FINGERPRINT_KEY].string_value == label_map_fingerprint(
        info.exec_properties["custom_config"]
    )


def test_the_pipelines_trainer_stays_tfxs_trainer_with_this_driver() -> None:
    pipeline = create_pipeline(build_config({}, ["pipeline.output=/tmp/out"]))
    (trainer,) = [component for component in pipeline.components if component.id == "Trainer"]
    assert trainer.driver_class is LabelMapDriver
    assert type(trainer).__module__ == "tfx.components.trainer.component"
