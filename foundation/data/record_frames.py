"""Each TFRecord's declared length, checked against a cap and the file before TensorFlow reads the record.

A TFRecord file is a run of records, each framed as (TensorFlow's `tensorflow/core/lib/io/record_writer.cc`)

    uint64 length    uint32 masked crc32c of length    byte data[length]    uint32 masked crc32c of data

and `RecordReader::ReadRecord` (`record_reader.cc`) checks the length's CRC, then reads `length + 4` bytes into one
buffer before it checks anything else. So a 112-byte file whose header (with a valid CRC) declares 64 GiB crashes
the reading process (SIGSEGV, no message), one declaring 1 GiB fails with "truncated record" only after allocating
it, and a 2 MB `.tfrecord.gz` whose one record inflates to 2 GiB costs 17 s of CPU and 2.9 GB of memory before
"corrupted record". tfxp's readers of a user's files walk the headers first (`check_record_frames`): a record
longer than `MAX_RECORD_BYTES`, or (uncompressed) longer than what is left of the file, is refused by file and
record index. The walk seeks past uncompressed records (12 bytes read per record); a compressed file is inflated
in 1 MiB steps and the data dropped, so it never holds more than a step, and it stops at the first header over
the cap. A header whose CRC does not match ends the walk: TensorFlow refuses that record itself, without
allocating it.

`MAX_RECORD_BYTES` is the largest example tfxp accepts: its image is at most `DEFAULT_MAX_IMAGE_PIXELS` pixels
(`trainer.max_image_pixels`), and no encoder writes more for one than a PNG of 16-bit RGBA samples stored
uncompressed (8 bytes a pixel plus a filter byte a row: zlib's stored blocks add 5 bytes per 64 KB), so 8 bytes a
pixel and an eighth more, plus 16 MiB for the other features (labels, text, ImageNet's boxes): 376 MB for 40 MP.
Real photos take a tenth of that.

Example:
    check_record_frames("data/train/part-00000-of-00004.tfrecord.gz")  # raises DataError on a bad header
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterator
from typing import IO

import google_crc32c

from foundation.data.errors import DataError
from foundation.image_formats import DEFAULT_MAX_IMAGE_PIXELS, MAX_PIXELS_SETTING
from foundation.paths import is_remote

HEADER_BYTES = 12  # uint64 length, uint32 masked crc of it
FOOTER_BYTES = 4  # uint32 masked crc of the data
BYTES_PER_PIXEL = 8  # 16-bit RGBA, the most a PNG stores per pixel
OTHER_FEATURES_BYTES = 16 * 1024 * 1024
MAX_RECORD_BYTES = DEFAULT_MAX_IMAGE_PIXELS * BYTES_PER_PIXEL * 9 // 8 + OTHER_FEATURES_BYTES
_CRC_MASK_DELTA = 0xA282EAD8
_STEP_BYTES = 1024 * 1024
_GZIP_WBITS = zlib.MAX_WBITS | 16  # TensorFlow's "GZIP" records: a gzip header (ZlibCompressionOptions::GZIP)
# Readers pick the compression from the file name, as ImportExampleGen (Beam's `CompressionTypes.AUTO`) does:
# `.gz` is GZIP, anything else (ImageNet's extension-less `train-00000-of-01024`, `.tfrecord`) is uncompressed.
_GZIP_SUFFIXES = (".gz", ".gzip")
# "{{function_node __wrapped__IteratorGetNext_...}} truncated record at 0' failed with ... [Op:IteratorGetNext] name: "
_OP_NOISE = re.compile(r"\{\{function_node [^}]*\}\}|\[Op:[^\]]*\]( name:.*)?$")


def compression_for(path: str | os.PathLike[str]) -> str:
    """`GZIP` for a file whose name ends in `.gz`, `""` (uncompressed) otherwise, as ImportExampleGen reads it."""
    return "GZIP" if str(path).endswith(_GZIP_SUFFIXES) else ""


def tf_error_text(error: Exception) -> str:
    """The first line of a TensorFlow error without its op decoration (`{{function_node ...}}`, `[Op:...]`)."""
    message = str(getattr(error, "message", "") or "").strip()
    first = message.splitlines()[0] if message else ""
    return _OP_NOISE.sub("", first).strip() or type(error).__name__


def _masked_crc(data: bytes) -> int:
    crc = int.from_bytes(google_crc32c.Checksum(data).digest(), "big")
    return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF


def _length(header: bytes) -> int | None:
    """The declared length of a whole header whose CRC matches, else None (TensorFlow refuses it unallocated)."""
    if len(header) < HEADER_BYTES:
        return None
    length, crc = struct.unpack("<QI", header[:HEADER_BYTES])
    return length if _masked_crc(header[:8]) == crc else None


def _over_cap(index: int, length: int, cap: int) -> str:
    return (
        f"record {index} declares {length} bytes, over the {cap} bytes tfxp reads for one example (an image at "
        f"the pixel limit, {MAX_PIXELS_SETTING}, stored uncompressed)"
    )


def _open(path: str) -> IO[bytes]:
    if is_remote(path):
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")  # type: ignore[no-any-return]
    return open(path, "rb")


def _walk_plain(path: str, records: int | None, cap: int) -> str | None:
    with _open(path) as file:
        file.seek(0, os.SEEK_END)
        size = file.tell()
        offset = index = 0
        while offset < size and (records is None or index < records):
            file.seek(offset)
            length = _length(file.read(HEADER_BYTES))
            if length is None:
                return None
            if length > cap:
                return _over_cap(index, length, cap)
            left = size - offset - HEADER_BYTES - FOOTER_BYTES
            if length > left:
                return f"record {index} declares {length} bytes, more than the {max(left, 0)} bytes left in the file"
            offset += HEADER_BYTES + length + FOOTER_BYTES
            index += 1
    return None


def _inflated(file: IO[bytes]) -> Iterator[bytes]:
    """The inflated bytes of a gzip file (every member), at most `_STEP_BYTES` at a time; stops at bad data."""
    inflater = zlib.decompressobj(_GZIP_WBITS)
    pending = b""  # the next member's first bytes, read with the last one's end
    while True:
        data = inflater.unconsumed_tail or pending or file.read(_STEP_BYTES)
        pending = b""
        if not data:
            return
        try:
            out = inflater.decompress(data, _STEP_BYTES)
        except zlib.error:
            return  # TensorFlow's own read reports the damage
        if out:
            yield out
        if inflater.eof:
            pending, inflater = inflater.unused_data, zlib.decompressobj(_GZIP_WBITS)


def _walk_gzip(path: str, records: int | None, cap: int) -> str | None:
    with _open(path) as file:
        header, skip, index = b"", 0, 0
        for chunk in _inflated(file):
            while chunk:
                if skip:
                    dropped = min(skip, len(chunk))
                    skip, chunk = skip - dropped, chunk[dropped:]
                    continue
                if records is not None and index >= records:
                    return None
                need = HEADER_BYTES - len(header)
                header, chunk = header + chunk[:need], chunk[need:]
                if len(header) < HEADER_BYTES:
                    break
                length = _length(header)
                if length is None:
                    return None
                if length > cap:
                    return _over_cap(index, length, cap)
                header, skip, index = b"", length + FOOTER_BYTES, index + 1
    return None


def record_frames_problem(path: str, records: int | None = None, cap: int | None = None) -> str | None:
    """What breaks the length rule in one TFRecord file (compression from its name), or None.

    Args:
        path: A local or bucket path; `.gz`/`.gzip` names are GZIP, others uncompressed (as ImportExampleGen reads).
        records: Check only the first this many records (what the caller reads); None: all.
        cap: The most bytes one record may declare; None: `MAX_RECORD_BYTES`.

    Returns:
        "record N declares L bytes, over ..." for the first record declaring more than `cap` bytes, or more than
        the uncompressed file has left; None when every header checked is within both.
    """
    walk = _walk_gzip if compression_for(path) else _walk_plain
    return walk(path, records, MAX_RECORD_BYTES if cap is None else cap)


def check_record_frames(path: str, records: int | None = None, cap: int | None = None) -> None:
    """`record_frames_problem` as an error: call it before TensorFlow reads the file.

    Raises:
        DataError: the file and the record that breaks the length rule, and how to fix it.
    """
    problem = record_frames_problem(path, records, cap)
    if problem is not None:
        raise DataError(
            f"TFRecord file {path}: {problem}; the file is damaged or not a TFRecord file of image examples "
            "(TensorFlow's reader would allocate the declared size): rewrite it (`tfxp data from-folder`) or "
            "remove it from the data"
        )
