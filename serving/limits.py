"""Request limits, checked on what a request declares before anything is allocated for it.

A `TensorProto` states its shape apart from its values, and TensorFlow broadcasts a single value to the whole
shape: 73 bytes can declare a [2097152,16,16,1] float tensor, 2 GiB once decoded. So the server checks each
request's declared sizes first:

- bytes: shape x bytes per element, summed over the request's tensors, may not exceed the request size
  limit (the same one that bounds the body; `tfxp serve` sets it with `serving.max_request_mb`). A string
  element counts 8 bytes (numpy's reference to it) plus, when one value is broadcast, that value's length;
  listed string values are already bounded by the message size.
- rows: dim 0 of an input whose signature leaves it open (the batch dimension) may not exceed the
  per-request batch limit (`serving.max_batch_size`), with server-side batching or without it.

- pixels: the width x height every image among a request's string values (or among the bytes features of a
  serialized tf.Example there, the `serving_tf_example` signature's input) declares in its header, times
  its frames for a GIF (`foundation.image_formats.image_pixels`), summed, may not exceed
  `serving.max_request_pixels`, so a few small files that decode to gigabytes are refused before any is
  decoded (the model's graph refuses each image over its own per-image limit, `trainer.max_image_pixels`, in
  TF Serving too).
- decoding work: those pixels times the scans of each progressive JPEG (`foundation.image_formats.decode_work`),
  summed, may not exceed `JPEG_SCAN_BUDGET` scans of `serving.max_request_pixels`: the model bounds each image's
  scans, and this bounds a request of many images at their limit, so a small request cannot hold the CPU for
  seconds.
- pixels per byte: the pixels of the images the model decodes (those within `DEFAULT_MAX_IMAGE_PIXELS`; larger
  ones its graph refuses from their header), when more than `FREE_REQUEST_PIXELS`, may not exceed
  `serving.max_pixels_per_byte` times those images' image data (`foundation.image_data.image_data_bytes`: a
  PNG's IDAT chunks, a JPEG less its APPn and COM segments, so padding buys nothing): a 103 KB request of two
  solid 6300 x 6300 PNGs (770 pixels a byte) cost 2 s of CPU and 1.6 GB, what two 40 MP photos cost in 20 MB.
  Photos take 2 to 16 pixels a byte, screenshots and scans 20 to 60; only flat images beyond a 4K frame or a 12 MP
  photo reach more.
- PNG data: a PNG whose zlib stream inflates to more than its rows take (`foundation.png_stream.inflates_past_rows`,
  inflating at most the rows): the model bounds each PNG's compressed data by its rows (in TF Serving too), which
  still lets a large declared image carry about 1032 times its rows of zeros; this refuses that too.

All answer INVALID_ARGUMENT (HTTP 400) naming the declared shape or size and the limit. JSON bodies are bounded too:
at most `MAX_JSON_DEPTH` levels of nesting (checked in `serving.json_tensor.parse_json_body`).

Example:
    limits = RequestLimits(max_bytes=16 << 20, max_batch_size=32)
    limits.check(declared_tensor_protos(request.inputs), batch_inputs={"images"})
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import tensor_pb2, types_pb2

from foundation.image_data import image_data_bytes
from foundation.image_formats import DEFAULT_MAX_IMAGE_PIXELS, JPEG_SCAN_BUDGET, decode_work, image_pixels
from foundation.png_stream import inflates_past_rows, png_stream_error
from serving.errors import InvalidArgumentError
from serving.options import DEFAULT_MAX_PIXELS_PER_BYTE, DEFAULT_MAX_REQUEST_PIXELS
from serving.tensors import dtype_of, shape_string

MAX_JSON_DEPTH = 64
BYTES_SETTING = "serving.max_request_mb"
BATCH_SETTING = "serving.max_batch_size"
PIXELS_SETTING = "serving.max_request_pixels"
PER_BYTE_SETTING = "serving.max_pixels_per_byte"
# Pixels a request may decode whatever its size: a 12 MP photo or a 4K frame (8.3 MP), however flat.
FREE_REQUEST_PIXELS = 1 << 24
_REFERENCE_BYTES = 8  # what numpy holds per element of a string (object) array


@dataclass(frozen=True)
class Declared:
    """The size a tensor declares: its shape and the bytes its decoded values take."""

    shape: tuple[int, ...]
    nbytes: int


def declared_tensor_proto(proto: tensor_pb2.TensorProto, alias: str) -> Declared:
    """The declared size of a TensorProto, read from its shape and dtype without decoding any value.

    Raises:
        InvalidArgumentError: an unsupported dtype, or a negative dimension.
    """
    dtype = dtype_of(proto.dtype)
    shape = tuple(dim.size for dim in proto.tensor_shape.dim)
    if any(size < 0 for size in shape):
        raise InvalidArgumentError(f"tensor {alias} declares shape {list(shape)}: dimensions must be >= 0")
    count = math.prod(shape)
    if dtype.enum != types_pb2.DT_STRING:
        return Declared(shape, count * np.dtype(dtype.numpy).itemsize)
    values = proto.string_val
    broadcast = len(values[0]) if len(values) == 1 and count != 1 else 0
    return Declared(shape, count * (_REFERENCE_BYTES + broadcast))


def declared_tensor_protos(protos: Mapping[str, tensor_pb2.TensorProto]) -> dict[str, Declared]:
    """`declared_tensor_proto` of each input of a request, by alias."""
    return {alias: declared_tensor_proto(proto, alias) for alias, proto in protos.items()}


def declared_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, Declared]:
    """The sizes of decoded inputs (e.g. from a JSON body), as `RequestLimits.check` takes them."""
    return {alias: Declared(array.shape, array.nbytes) for alias, array in arrays.items()}


@dataclass(frozen=True)
class DeclaredImages:
    """What the images among a request's values declare: how many, the pixels they decode to in total (width x
    height, times the frames of a GIF), the decoding work (those pixels times each JPEG's scans), and the pixels
    and bytes of the images within the model's default per-image limit (those its graph decodes)."""

    images: int = 0
    pixels: int = 0
    work: int = 0
    decoded_pixels: int = 0
    decoded_bytes: int = 0


def _images(value: object) -> Iterator[bytes]:
    """`value` when it is an image of an accepted format; else, when it is a serialized tf.Example (what the
    `serving_tf_example` signature takes), the images among its bytes features; else nothing."""
    if not isinstance(value, bytes):
        return
    if image_pixels(value) is not None:
        yield value
        return
    try:
        example = example_pb2.Example.FromString(value)
    except DecodeError:
        return
    for feature in example.features.feature.values():
        yield from (item for item in feature.bytes_list.value if image_pixels(item) is not None)


def declared_pixels(values: Iterable[object]) -> DeclaredImages:
    """`DeclaredImages` of the values that are images of an accepted format, or serialized tf.Examples holding
    such images (the images count); other values (text) count nothing."""
    images = pixels = work = decoded_pixels = decoded_bytes = 0
    for value in values:
        for image in _images(value):
            declared = image_pixels(image) or 0
            images += 1
            pixels += declared
            work += decode_work(image) or declared
            if declared <= DEFAULT_MAX_IMAGE_PIXELS:
                decoded_pixels += declared
                decoded_bytes += image_data_bytes(image)
    return DeclaredImages(images, pixels, work, decoded_pixels, decoded_bytes)


def byte_size(nbytes: int) -> str:
    """`nbytes` for people: `512 B`, `16 MiB`, `2 GiB`, `256 TiB`."""
    value, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.3g} {unit}"


@dataclass(frozen=True)
class RequestLimits:
    """How large one request may be.

    Attributes:
        max_bytes: Most bytes one request's tensors may take once decoded (and its body on the wire).
        max_batch_size: Most rows (dim 0 of batch inputs) one request may carry; None = no limit.
        max_pixels: Most pixels the images among one request's string values may declare in total.
        max_pixels_per_byte: Most pixels a byte of image data may decode to, beyond `FREE_REQUEST_PIXELS` per
            request; 0 = no limit.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_batch_size: int | None = None
    max_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_pixels_per_byte: int = DEFAULT_MAX_PIXELS_PER_BYTE

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {self.max_bytes}")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {self.max_batch_size}")
        if self.max_pixels < 1:
            raise ValueError(f"max_pixels must be >= 1, got {self.max_pixels}")
        if self.max_pixels_per_byte < 0:
            raise ValueError(f"max_pixels_per_byte must be >= 0, got {self.max_pixels_per_byte}")

    def check_pixels(self, values: Iterable[object]) -> None:
        """Refuses a request whose images declare more than `max_pixels` pixels in total, more decoding work
        than `JPEG_SCAN_BUDGET` scans of them, or a PNG whose data inflates past its rows
        (`foundation.png_stream.inflates_past_rows`), before any is decoded.

        Raises:
            InvalidArgumentError: naming the images, their pixels or work, and the limit's setting.
        """
        values = list(values)
        declared = declared_pixels(values)
        if declared.pixels > self.max_pixels:
            raise InvalidArgumentError(
                f"the request's {declared.images} image(s) declare {declared.pixels} pixels in total, over this "
                f"server's limit of {self.max_pixels} pixels per request ({PIXELS_SETTING}); send fewer or smaller "
                "images"
            )
        if declared.work > JPEG_SCAN_BUDGET * self.max_pixels:
            raise InvalidArgumentError(
                f"the request's {declared.images} image(s) take {declared.work} pixel scans to decode (pixels "
                f"times each progressive JPEG's scans), over this server's limit of {JPEG_SCAN_BUDGET} scans of "
                f"{self.max_pixels} pixels per request ({PIXELS_SETTING}); send fewer images, or re-encode them "
                "as baseline JPEG or PNG"
            )
        self._check_density(declared)
        for image in (image for value in values for image in _images(value)):
            if too_much := png_stream_error(image) or inflates_past_rows(image):  # the model's message first
                raise InvalidArgumentError(too_much)

    def _check_density(self, declared: DeclaredImages) -> None:
        allowed = max(FREE_REQUEST_PIXELS, self.max_pixels_per_byte * declared.decoded_bytes)
        if self.max_pixels_per_byte and declared.decoded_pixels > allowed:
            raise InvalidArgumentError(
                f"the request's image(s) declare {declared.decoded_pixels} pixels in {declared.decoded_bytes} bytes of "
                f"image data ({declared.decoded_pixels // max(declared.decoded_bytes, 1)} pixels a byte; metadata "
                "and padding do not count), over this server's "
                f"limit of {self.max_pixels_per_byte} pixels a byte of image data for a request of more than "
                f"{FREE_REQUEST_PIXELS} pixels ({PER_BYTE_SETTING}): images this flat decode to gigabytes from a "
                "few kilobytes; send them downscaled"
            )

    def check_images(self, inputs: Mapping[str, np.ndarray]) -> None:
        """`check_pixels` over every string input of a request."""
        self.check_pixels(value for array in inputs.values() if array.dtype == object for value in array.flat)

    def check(self, declared: Mapping[str, Declared], batch_inputs: Collection[str] = ()) -> None:
        """Refuses a request whose tensors are too large, before they are decoded.

        Args:
            declared: Each input's declared shape and decoded bytes, by alias.
            batch_inputs: Aliases whose dim 0 is the batch dimension (the signature leaves it open).

        Raises:
            InvalidArgumentError: more rows than `max_batch_size` in a batch input (TF Serving's batching
                text, plus the limit's setting), or more decoded bytes than `max_bytes`; the message names
                the declared shape and the limit.
        """
        if self.max_batch_size is not None:
            for alias in sorted(batch_inputs):
                size = declared.get(alias)
                if size is not None and size.shape and size.shape[0] > self.max_batch_size:
                    raise InvalidArgumentError(
                        f"Task size {size.shape[0]} is larger than maximum input batch size {self.max_batch_size}: "
                        f"input {alias} declares shape {shape_string(size.shape)}, and one request may carry at "
                        f"most {self.max_batch_size} rows ({BATCH_SETTING})"
                    )
        total = sum(size.nbytes for size in declared.values())
        if total > self.max_bytes:
            alias, largest = max(declared.items(), key=lambda item: item[1].nbytes)
            what = f"input {alias} declares shape {shape_string(largest.shape)} ({math.prod(largest.shape)} values"
            if largest.nbytes > self.max_bytes:
                what += f", {byte_size(largest.nbytes)} decoded)"
            else:
                what += f"); the request's inputs take {byte_size(total)} decoded"
            limit = byte_size(self.max_bytes)
            if self.max_bytes >= 1024:
                limit += f" ({self.max_bytes} bytes)"
            raise InvalidArgumentError(f"{what}, over this server's limit of {limit} per request ({BYTES_SETTING})")
