"""The TFRecord length rule: a record header declaring more than the cap, or (uncompressed) more than the file has
left, is refused by file and record index before TensorFlow's reader allocates it."""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
from pathlib import Path

import google_crc32c
import pytest
import tensorflow as tf

from foundation.data import record_frames
from foundation.data.errors import DataError
from foundation.data.probe import sample_label_evidence
from foundation.data.record_frames import check_record_frames, record_frames_problem
from foundation.data.tfrecords import iter_examples, make_example, read_label_ids
from pipeline.runners.diagnose import find_corrupt_tfrecords
from serving.warmup import read_warmup_requests

REPO = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def _masked(data: bytes) -> bytes:
    crc = int.from_bytes(google_crc32c.Checksum(data).digest(), "big")
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def _frame(data: bytes, declared: int | None = None) -> bytes:
    """One record; `declared` puts another length (with a valid CRC) in its header."""
    length = struct.pack("<Q", len(data) if declared is None else declared)
    return length + _masked(length) + data + _masked(data)


def _honest(count: int) -> bytes:
    return b"".join(_frame(make_example(b"x", label).SerializeToString()) for label in range(count))


def test_files_tensorflow_writes_pass(tmp_path: Path) -> None:
    for name, options in (("a.tfrecord", ""), ("a.tfrecord.gz", "GZIP")):
        with tf.io.TFRecordWriter(str(tmp_path / name), options) as writer:
            for label in range(50):
                writer.write(make_example(os.urandom(3000), label).SerializeToString())
        assert record_frames_problem(str(tmp_path / name)) is None
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    assert record_frames_problem(str(tmp_path / "empty.tfrecord")) is None


def test_a_header_over_the_cap_is_refused_by_record_index(tmp_path: Path) -> None:
    path = tmp_path / "part-0.tfrecord"
    path.write_bytes(_honest(2) + _frame(b"x" * 100, declared=64 * GIB))
    problem = record_frames_problem(str(path))
    assert problem is not None and problem.startswith(f"record 2 declares {64 * GIB} bytes, over the ")
    assert record_frames_problem(str(path), records=2) is None  # a reader of the first two never meets it


def test_a_header_past_the_end_of_an_uncompressed_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "part-0.tfrecord"
    path.write_bytes(_honest(1) + _frame(b"x" * 100, declared=64 << 20))
    assert (
        record_frames_problem(str(path))
        == f"record 1 declares {64 << 20} bytes, more than the 100 bytes left in the file"
    )


def test_a_gzip_record_over_the_cap_is_refused_before_it_is_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_frames, "MAX_RECORD_BYTES", 1 << 20)
    path = tmp_path / "part-0.tfrecord.gz"
    path.write_bytes(gzip.compress(_honest(3) + _frame(bytes(8 << 20))))  # a real 8 MiB record: 8 KB on disk
    inflated: list[int] = []
    real = record_frames._inflated
    monkeypatch.setattr(record_frames, "_inflated", lambda file: (inflated.append(len(c)) or c for c in real(file)))
    with pytest.raises(DataError, match=rf"TFRecord file {path}: record 3 declares {8 << 20} bytes, over the 1048576"):
        check_record_frames(str(path))
    assert sum(inflated) <= 1 << 20  # one inflating step: the 8 MiB were never produced


def test_readers_name_the_file_and_record_instead_of_tensorflows_op_text(tmp_path: Path) -> None:
    path = tmp_path / "part-0.tfrecord"
    path.write_bytes(_honest(2) + _frame(b"x" * 100, declared=64 << 20))
    # Before the rule: "{{function_node __wrapped__IteratorGetNext...}} truncated record at ... [Op:IteratorGetNext]".
    expected = rf"TFRecord file {path}: record 2 declares {64 << 20} bytes, more than the 100 bytes left"
    with pytest.raises(DataError, match=expected):
        list(iter_examples([path]))
    with pytest.raises(DataError, match=expected):
        list(read_label_ids([path]))
    with pytest.raises(DataError, match=expected):  # before: the probe skipped the file, leaving it to the run
        sample_label_evidence(str(tmp_path / "*.tfrecord"), count=64)
    [(where, why)] = find_corrupt_tfrecords([str(tmp_path / "*")])  # after a failed run
    assert (where, why) == (str(path), f"record 2 declares {64 << 20} bytes, more than the 100 bytes left in the file")


def test_a_tensorflow_read_error_is_one_line_without_op_text(tmp_path: Path) -> None:
    path = tmp_path / "part-0.tfrecord"
    path.write_bytes(_honest(2) + b"\x01" * 30)  # a header whose CRC does not match: TensorFlow refuses it
    with pytest.raises(DataError) as raised:
        list(iter_examples([path]))
    assert str(raised.value).startswith(f"cannot read TFRecord file {path} at record 2: ")
    assert "function_node" not in str(raised.value) and "[Op:" not in str(raised.value)


def test_served_warmup_records_follow_the_rule(tmp_path: Path) -> None:
    extra = tmp_path / "assets.extra"
    extra.mkdir()
    (extra / "tf_serving_warmup_requests").write_bytes(_frame(b"x" * 100, declared=64 << 20))
    with pytest.raises(ValueError, match=rf"\(record 0 declares {64 << 20} bytes, more than the 100 bytes left"):
        read_warmup_requests(tmp_path)


def test_data_inspect_refuses_a_record_declaring_64_gib_by_name(tmp_path: Path) -> None:
    """The reproduction: a 112-byte file crashed `tfxp data inspect` (SIGSEGV, exit 139); a subprocess, since the
    crash would take pytest with it."""
    for split in ("train", "eval"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "part-0.tfrecord").write_bytes(_frame(b"x" * 100, declared=64 * GIB))
    (tmp_path / "labels.txt").write_text("a\nb\n")
    program = "import sys; sys.argv[0] = 'tfxp'; from pipeline.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", program, "data", "inspect", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"record 0 declares {64 * GIB} bytes" in done.stderr and "Traceback" not in done.stderr
