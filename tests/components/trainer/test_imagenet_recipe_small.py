"""The shipped one-node ImageNet config, shortened, on a small JPEG set: ResNet-50 v1.5 trains with NVIDIA's
recipe to a model that answers more than one class (issue 32: the old recipe exported a one-class model).

Only what a CPU needs changes (image size, batch, steps, precision, XLA, the warmup as a fraction of the short
run); the optimizer, schedule shape, weight decay, label smoothing, crops and eval crop stay the config's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from components.trainer.options import RunOptions
from pipeline.config import load_config

REPO = Path(__file__).resolve().parents[3]
CLASSES = ("circle", "square", "stripes")


def write_jpeg_folder(root: Path, per_class: int = 40, seed: int = 0) -> None:
    """SRC/<class>/<n>.jpg: bright shapes of random size and place on dark noise, non-square frames."""
    rng = np.random.default_rng(seed)
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for index in range(per_class):
            width, height = int(rng.integers(72, 112)), int(rng.integers(72, 112))
            image = Image.fromarray(rng.integers(0, 60, (height, width, 3), dtype=np.uint8))
            draw = ImageDraw.Draw(image)
            size = int(rng.integers(min(width, height) // 2, min(width, height) - 4))
            x, y = int(rng.integers(0, width - size)), int(rng.integers(0, height - size))
            colour = tuple(int(c) for c in rng.integers(150, 256, 3))
            if label == 0:
                draw.ellipse([x, y, x + size, y + size], fill=colour)
            elif label == 1:
                draw.rectangle([x, y, x + size, y + size], fill=colour)
            else:
                for row in range(0, height, 8):
                    draw.rectangle([0, row, width, row + 3], fill=colour)
            image.save(root / name / f"{index}.jpg", quality=90)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from components.trainer.training import TrainerPaths, train_and_export

    root = tmp_path_factory.mktemp("imagenet_small")
    write_jpeg_folder(root / "src")
    tfxp = [
        str(Path(sys.executable).parent / "tfxp"),
        "data",
        "from-folder",
        str(root / "src"),
        "--out",
        str(root / "data"),
    ]
    subprocess.run(tfxp, check=True, capture_output=True, cwd=REPO)
    config = load_config(
        REPO / "configs/imagenet_a100.yaml",
        [
            "trainer.image_size=32",
            "trainer.batch_size=16",
            "trainer.train_steps=200",
            "trainer.steps_per_epoch=50",
            "trainer.images_per_epoch=96",
            "trainer.schedule.warmup_epochs=0",
            "trainer.schedule.warmup_fraction=0.1",
            "trainer.precision=float32",
            "trainer.xla=off",
            "trainer.strategy=auto",
            "trainer.cache=true",
            "trainer.shuffle_buffer=256",
        ],
    )
    run = RunOptions.model_validate(
        {"trainer": config.trainer.model_dump(), "labels_path": str(root / "data/labels.txt")}
    )
    paths = TrainerPaths(
        [str(root / "data/train/*")], [str(root / "data/eval/*")], str(root / "serving"), str(root / "run")
    )
    return train_and_export(run, paths)


@pytest.mark.long
def test_the_shortened_a100_config_trains_resnet50_v15_that_is_not_one_class(trained: dict[str, Any]) -> None:
    recipe = trained["recipe"]
    assert trained["model"] == "resnet50" and recipe["optimizer_class"] == "SGD"
    assert recipe["optimizer"]["momentum"] == 0.875 and recipe["label_smoothing"] == 0.1
    assert recipe["optimizer"]["weight_decay"] == 3.0517578125e-05 and recipe["decayed_in_loss"] > 0
    assert recipe["schedule"]["name"] == "cosine" and recipe["eval_crop"] == 0.875
    assert recipe["warmup_steps"] == 20 and recipe["peak_learning_rate"] == pytest.approx(0.256 * 16 / 256)
    assert trained["diagnosis"]["broken"] is False
    # Three classes of 8 eval images each: one class alone would score 1/3 with a top share of 1.0 (the old
    # recipe's model answered class 0 for every image). Measured here: accuracy 0.71 and 0.92 in two runs, and
    # twice a top share of 0.67 (16 of 24 answers one class; not bit-deterministic on CPU): the bound is "clearly
    # not one class", not a share the short run always beats.
    assert trained["eval_top_predicted_share"] <= 0.75 and trained["final_accuracy"] >= 0.6, trained
