"""Input pipeline benchmark: tfxp's tf.data pipeline vs a raw decode ceiling and a naive pipeline.

For each data set (224×224 JPEGs made from 256×256 photo-like images with the `tfxp data from-folder`
converter, and the digits PNGs), images/s of:

- (a) `ceiling`: the same encoded images, already in memory, decoded and resized by the shared preprocessing
  in a tight loop on one thread per core — no file reading, parsing, batching or anything else;
- (b) `naive`: TFRecords → sequential parse+decode+resize → batch, no prefetch, with tf.data's silent
  optimisations (autotune, `map_parallelization`, `inject_prefetch`) switched off;
- (c) `tfxp`: `components.trainer.input_pipeline.make_dataset` for training (interleave, parallel map,
  shuffle, repeat, batch, crop+flip augmentation, prefetch); also reported without augmentation
  (`tfxp_no_augment`), which separates the pipeline's overhead from the augmentation's own work, and with
  `cache` and no augmentation (`tfxp_cache`: decoded and resized once; the digits trainer's defaults);
- `records`: what (c) does besides decoding: read the gzip TFRecords (parallel interleave), shuffle, batch
  and parse, nothing decoded. The ceiling leaves this work out; when it is as large as the decoding (tiny
  PNGs), no pipeline on the same cores can come near (a). So the JSON also reports the work-conserving bound
  1 / (1/a + 1/records) — both kinds of work on all cores, perfectly overlapped — and c over it.

Pipelines (b) and (c) repeat, and are timed after a few warm-up batches (steady state). Each round measures
all three in a rotated order so drifting machine load hits each alike; reported are medians over rounds and
the ratios c/a (target ≥ 0.9) and c/b (target ≥ 1.8).

Usage:
    .venv/bin/python bench/input_pipeline.py --out bench/results [--rounds 5] [--images 1024]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import bench_parser, command_line, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("ceiling", "naive", "tfxp", "tfxp_no_augment", "tfxp_cache", "records")
AUGMENT = ("crop", "flip")
TARGETS = {"tfxp_over_ceiling": 0.9, "tfxp_over_naive": 1.8}
BATCH = 64
WARMUP_BATCHES = 3


def make_jpeg_folder(src: Path, count: int, size: int, classes: int = 4) -> None:
    """Photo-like JPEGs (smooth colour fields + noise, so sizes resemble photos) in class subfolders."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for index in range(count):
        coarse = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((size, size), Image.BICUBIC), dtype=np.int16)
        pixels = np.clip(field + rng.normal(0, 12, field.shape), 0, 255).astype(np.uint8)
        folder = src / f"class{index % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / f"{index:05d}.jpg", quality=90)


def prepare_data(work: Path, jpeg_images: int) -> dict[str, dict[str, Any]]:
    from components.data.digits import write_digits
    from components.data.from_folder import convert_folder

    make_jpeg_folder(work / "jpeg_src", jpeg_images, size=256)
    convert_folder(work / "jpeg_src", work / "jpeg", eval_fraction=0.1, shards=4)
    write_digits(work / "digits")
    return {
        "jpeg224": {"files": str(work / "jpeg" / "train" / "*"), "image_size": 224, "channels": 3},
        "digits": {"files": str(work / "digits" / "train" / "*"), "image_size": 16, "channels": 1},
    }


def load_encoded(pattern: str) -> list[bytes]:
    import tensorflow as tf

    from components.trainer.input_pipeline import list_files
    from foundation.contract import IMAGE_KEY

    feature = {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)}
    records = tf.data.TFRecordDataset(list_files(pattern), compression_type="GZIP")
    return [tf.io.parse_single_example(record, feature)[IMAGE_KEY].numpy() for record in records]


def ceiling_runner(encoded: list[bytes], image_size: int, channels: int, images: int) -> Callable[[], float]:
    """(a): decode+resize `images` in-memory images on one thread per core; returns seconds."""
    import tensorflow as tf

    from foundation.preprocessing import decode_pixels, pixels_to_input
    from foundation.preprocessing_spec import PreprocessingSpec

    spec = PreprocessingSpec(image_size, channels)
    threads = os.cpu_count() or 1
    pool = [encoded[i % len(encoded)] for i in range(images)]
    chunks = [tf.constant(pool[i::threads]) for i in range(threads)]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def decode_all(chunk: tf.Tensor) -> tf.Tensor:
        # A sequential in-graph loop: one decode after another on this thread, nothing else.
        return tf.reduce_sum(
            tf.map_fn(
                lambda image: pixels_to_input(decode_pixels(image, spec), spec)[0, 0, 0],  # no format check
                chunk,
                fn_output_signature=tf.float32,
                parallel_iterations=1,
            )
        )

    for chunk in chunks:
        decode_all(chunk[:2])  # trace outside the timing

    def run() -> float:
        workers = [threading.Thread(target=lambda c=chunk: decode_all(c).numpy()) for chunk in chunks]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return time.perf_counter() - started

    return run


def naive_dataset(pattern: str, image_size: int, channels: int) -> Any:
    import tensorflow as tf

    from components.trainer.input_pipeline import list_files, parse_example
    from foundation.preprocessing_spec import PreprocessingSpec

    spec = PreprocessingSpec(image_size, channels)
    dataset = tf.data.TFRecordDataset(list_files(pattern), compression_type="GZIP").repeat()
    dataset = dataset.map(lambda record: parse_example(record, spec)).batch(BATCH)
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.inject_prefetch = False
    return dataset.with_options(options)


def tfxp_dataset(
    pattern: str, image_size: int, channels: int, augment: tuple[str, ...] = AUGMENT, cache: bool = False
) -> Any:
    from components.trainer.input_pipeline import InputOptions, make_dataset

    options = InputOptions(
        image_size=image_size, channels=channels, batch_size=BATCH, training=True, augment=augment, cache=cache
    )
    return make_dataset(pattern, options)


def records_dataset(pattern: str) -> Any:
    """(c) without the decoding: the same reading, shuffling, batching and parsing of the records."""
    import tensorflow as tf

    from components.trainer.input_pipeline import _FEATURES, list_files

    files = list_files(pattern)
    dataset = tf.data.Dataset.from_tensor_slices(files).interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type="GZIP"),
        cycle_length=min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    dataset = dataset.shuffle(2048).repeat().batch(BATCH, drop_remainder=True)
    dataset = dataset.map(
        lambda serialized: tf.io.parse_example(serialized, _FEATURES), num_parallel_calls=tf.data.AUTOTUNE
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def dataset_runner(make: Callable[[], Any], images: int) -> Callable[[], float]:
    """(b)/(c): seconds for `images` images after warm-up batches, from a fresh iterator."""
    batches = max(1, images // BATCH)

    def run() -> float:
        iterator = iter(make())
        for _ in range(WARMUP_BATCHES):
            next(iterator)
        started = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        return time.perf_counter() - started

    return run


def measure(data: dict[str, Any], images: int, rounds: int) -> dict[str, Any]:
    pattern, size, channels = data["files"], data["image_size"], data["channels"]
    counted = max(1, images // BATCH) * BATCH
    runners = {
        "ceiling": ceiling_runner(load_encoded(pattern), size, channels, counted),
        "naive": dataset_runner(lambda: naive_dataset(pattern, size, channels), counted),
        "tfxp": dataset_runner(lambda: tfxp_dataset(pattern, size, channels), counted),
        "tfxp_no_augment": dataset_runner(lambda: tfxp_dataset(pattern, size, channels, ()), counted),
        "tfxp_cache": dataset_runner(lambda: tfxp_dataset(pattern, size, channels, (), cache=True), counted),
        "records": dataset_runner(lambda: records_dataset(pattern), counted),
    }
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_index in range(rounds):
        shift = round_index % len(VARIANTS)
        order = VARIANTS[shift:] + VARIANTS[:shift]
        for name in order:
            rates[name].append(counted / runners[name]())
    medians = {name: statistics.median(values) for name, values in rates.items()}
    bound = 1 / (1 / medians["ceiling"] + 1 / medians["records"])
    return {
        "images_per_measurement": counted,
        "image_size": size,
        "channels": channels,
        "images_per_second": rates,
        "median_images_per_second": medians,
        "read_and_decode_bound_images_per_second": bound,
        "ratios": {
            "tfxp_over_ceiling": medians["tfxp"] / medians["ceiling"],
            "tfxp_over_naive": medians["tfxp"] / medians["naive"],
            "tfxp_no_augment_over_ceiling": medians["tfxp_no_augment"] / medians["ceiling"],
            "tfxp_cache_over_ceiling": medians["tfxp_cache"] / medians["ceiling"],
            "bound_over_ceiling": bound / medians["ceiling"],
            "tfxp_over_bound": medians["tfxp"] / bound,
        },
    }


def main() -> None:
    parser = bench_parser(__doc__.split("\n\n")[0], "input_pipeline.json")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved repetitions (medians are reported)")
    parser.add_argument("--images", type=int, default=1024, help="images timed per measurement (224 JPEG)")
    parser.add_argument("--jpeg-images", type=int, default=600, help="JPEGs generated for the data set")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    with tempfile.TemporaryDirectory(prefix="tfxp-bench-input-") as work:
        datasets = prepare_data(Path(work), args.jpeg_images)
        # Digits decode ~100× faster than 224 JPEGs: time more of them for a comparable measurement length.
        sizes = {"jpeg224": args.images, "digits": args.images * 16}
        results = {name: measure(data, sizes[name], args.rounds) for name, data in datasets.items()}

    report = {
        "benchmark": "input_pipeline",
        "command": command_line(),
        "machine": machine(),
        "rounds": args.rounds,
        "batch": BATCH,
        "targets": TARGETS,
        "datasets": results,
    }
    path = write_report(args.out, "input_pipeline.json", report)
    for name, result in results.items():
        medians, ratios = result["median_images_per_second"], result["ratios"]
        print(
            f"{name:8s} ceiling {medians['ceiling']:8.0f} img/s  naive {medians['naive']:8.0f} img/s  "
            f"tfxp {medians['tfxp']:8.0f} img/s  tfxp/ceiling {ratios['tfxp_over_ceiling']:.2f} (target ≥ 0.9)  "
            f"tfxp/naive {ratios['tfxp_over_naive']:.2f} (target ≥ 1.8)  "
            f"without augmentation {medians['tfxp_no_augment']:.0f} img/s = "
            f"{ratios['tfxp_no_augment_over_ceiling']:.2f} × ceiling; cached, no augmentation "
            f"{medians['tfxp_cache']:.0f} img/s; records alone {medians['records']:.0f} img/s → read+decode "
            f"bound {result['read_and_decode_bound_images_per_second']:.0f} img/s = "
            f"{ratios['bound_over_ceiling']:.2f} × ceiling, tfxp/bound {ratios['tfxp_over_bound']:.2f}"
        )
    print(f"wrote {path} (load average at the end: {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
