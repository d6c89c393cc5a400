"""Request limits, addresses and body decoding: the pure checks that keep bad requests and bad options out."""

from __future__ import annotations

import gzip
import io
import time
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image
from tensorflow.core.framework import tensor_pb2, types_pb2

from foundation.image_data import image_data_bytes
from serving.address import check_port, host_port, parse_grpc_target, parse_rest_url
from serving.batching import BatchingOptions
from serving.errors import InvalidArgumentError, RequestTooLargeError, UnsupportedMediaTypeError
from serving.json_tensor import json_to_ndarray, parse_json_body
from serving.limits import (
    MAX_JSON_DEPTH,
    RequestLimits,
    byte_size,
    declared_arrays,
    declared_tensor_proto,
    declared_tensor_protos,
)
from serving.rest import decode_body
from serving.server_options import ServerOptions
from serving.tensors import dtype_of, tensor_proto_to_ndarray


def proto(dtype: int, shape: list[int], **values: list) -> tensor_pb2.TensorProto:  # type: ignore[type-arg]
    tensor = tensor_pb2.TensorProto(dtype=dtype)
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    for field, items in values.items():
        getattr(tensor, field).extend(items)
    return tensor


# --- declared sizes --------------------------------------------------------------------------------------------


def test_declared_size_comes_from_shape_and_dtype_without_decoding() -> None:
    huge = proto(types_pb2.DT_FLOAT, [2**40, 16, 16, 1], float_val=[0.5])
    started = time.perf_counter()
    declared = declared_tensor_proto(huge, "images")
    assert time.perf_counter() - started < 0.1
    assert declared.shape == (2**40, 16, 16, 1) and declared.nbytes == 2**40 * 256 * 4
    assert declared_tensor_proto(proto(types_pb2.DT_UINT8, [3, 2], int_val=[1]), "x").nbytes == 6
    assert declared_tensor_proto(proto(types_pb2.DT_INT64, [5]), "x").nbytes == 40


def test_a_broadcast_string_counts_its_length_for_every_element() -> None:
    listed = proto(types_pb2.DT_STRING, [2], string_val=[b"a" * 100, b"b"])
    broadcast = proto(types_pb2.DT_STRING, [1000], string_val=[b"a" * 100])
    assert declared_tensor_proto(listed, "x").nbytes == 2 * 8  # listed values are bounded by the message size
    assert declared_tensor_proto(broadcast, "x").nbytes == 1000 * (8 + 100)


def test_a_negative_dimension_or_unsupported_dtype_is_invalid() -> None:
    with pytest.raises(InvalidArgumentError, match=r"tensor x declares shape \[2, -1\]: dimensions must be >= 0"):
        declared_tensor_proto(proto(types_pb2.DT_FLOAT, [2, -1]), "x")
    with pytest.raises(InvalidArgumentError, match="DT_HALF are not supported"):
        declared_tensor_proto(proto(types_pb2.DT_HALF, [1]), "x")


def test_too_many_bytes_are_refused_naming_the_shape_and_the_limit() -> None:
    limits = RequestLimits(max_bytes=1 << 20)
    request = {"images": proto(types_pb2.DT_FLOAT, [2097152, 16, 16, 1], float_val=[0.5])}
    with pytest.raises(InvalidArgumentError) as caught:
        limits.check(declared_tensor_protos(request))
    assert caught.value.message == (
        "input images declares shape [2097152,16,16,1] (536870912 values, 2 GiB decoded), over this server's "
        "limit of 1 MiB (1048576 bytes) per request (serving.max_request_mb)"
    )


def test_the_byte_limit_is_on_the_whole_request() -> None:
    limits = RequestLimits(max_bytes=1000)
    two = {name: proto(types_pb2.DT_FLOAT, [200]) for name in ("a", "b")}  # 800 bytes each
    with pytest.raises(
        InvalidArgumentError, match=r"inputs take 1.56 KiB decoded, over this server's limit of 1000 B per"
    ):
        limits.check(declared_tensor_protos(two))
    limits.check(declared_tensor_protos({"a": two["a"]}))


def test_rows_over_the_batch_limit_are_refused_for_batch_inputs_only() -> None:
    limits = RequestLimits(max_bytes=1 << 30, max_batch_size=32)
    request = {"images": proto(types_pb2.DT_FLOAT, [32768, 2], float_val=[0.5])}
    with pytest.raises(InvalidArgumentError) as caught:
        limits.check(declared_tensor_protos(request), batch_inputs={"images"})
    assert caught.value.message.startswith("Task size 32768 is larger than maximum input batch size 32")
    assert "declares shape [32768,2]" in caught.value.message and "(serving.max_batch_size)" in caught.value.message
    limits.check(declared_tensor_protos(request), batch_inputs=())  # dim 0 fixed by the signature: not rows
    limits.check(declared_tensor_protos({"images": proto(types_pb2.DT_FLOAT, [32, 2])}), batch_inputs={"images"})
    RequestLimits(max_batch_size=None).check(declared_tensor_protos(request), batch_inputs={"images"})


def test_decoded_arrays_are_checked_the_same_way() -> None:
    limits = RequestLimits(max_bytes=100, max_batch_size=4)
    with pytest.raises(InvalidArgumentError, match="Task size 5"):
        limits.check(declared_arrays({"x": np.zeros((5, 1), np.float32)}), batch_inputs={"x"})
    with pytest.raises(InvalidArgumentError, match=r"declares shape \[4,8\]"):
        limits.check(declared_arrays({"x": np.zeros((4, 8), np.float32)}), batch_inputs={"x"})


def test_limits_and_sizes_are_validated_and_readable() -> None:
    with pytest.raises(ValueError, match="max_batch_size must be >= 1"):
        RequestLimits(max_batch_size=0)
    assert [byte_size(n) for n in (512, 1536, 16 << 20, 2 << 30)] == ["512 B", "1.5 KiB", "16 MiB", "2 GiB"]


def test_server_options_derive_the_request_limits() -> None:
    assert ServerOptions(max_request_bytes=1000).request_limits() == RequestLimits(1000, None)
    batching = BatchingOptions(max_batch_size=8)
    assert ServerOptions(batching=batching).request_limits().max_batch_size == 8
    assert ServerOptions(batching=None, max_batch_size=32).request_limits().max_batch_size == 32


@pytest.mark.parametrize("name", ["idle_timeout_seconds", "request_timeout_seconds"])
def test_a_timeout_grpc_cannot_take_is_refused_by_name(name: str) -> None:
    """gRPC takes them as int32 milliseconds: 30 days was an OverflowError when the server started (issue 35)."""
    with pytest.raises(ValueError, match=rf"ServerOptions.{name} must be > 0 and at most 2147483 s .*got 2592000"):
        ServerOptions(**{name: 30 * 24 * 3600})
    from pipeline.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=rf"serving.{name}` = 2592000: Input should be less than or equal to 2147483"):
        load_config(None, [f"serving.{name}=2592000"])


def test_decoding_refuses_values_out_of_the_dtype_range() -> None:
    with pytest.raises(InvalidArgumentError, match="tensor parsing error: x"):
        tensor_proto_to_ndarray(proto(types_pb2.DT_INT8, [1], int_val=[300]), "x")


# --- ports and addresses ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", [0, -1, 65536, 70000])
def test_ports_outside_1_to_65535_are_refused(port: int) -> None:
    with pytest.raises(ValueError, match=rf"--grpc-port {port} is not a TCP port: use 1-65535$"):
        check_port(port, "--grpc-port")


def test_port_zero_is_accepted_only_where_it_means_pick_a_free_port() -> None:
    assert check_port(0, allow_zero=True) == 0
    assert ServerOptions(grpc_port=0, rest_port=0).grpc_port == 0
    with pytest.raises(ValueError, match=r"ServerOptions.grpc_port 70000 is not a TCP port: use 0-65535"):
        ServerOptions(grpc_port=70000)
    with pytest.raises(ValueError, match=r"ServerOptions.rest_port -1 is not a TCP port"):
        ServerOptions(rest_port=-1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("localhost:8500", ("localhost", 8500)), ("10.0.0.7:1", ("10.0.0.7", 1)), ("[::1]:65535", ("::1", 65535))],
)
def test_grpc_targets_are_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_grpc_target(text) == expected
    assert host_port(*expected) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://localhost:8501", "http://localhost:8501"),
        ("http://localhost:8501/", "http://localhost:8501"),
        ("https://models.example.com/tfserving/", "https://models.example.com/tfserving"),
        ("http://[::1]:8501", "http://[::1]:8501"),
    ],
)
def test_rest_urls_are_http_base_urls(text: str, expected: str) -> None:
    assert parse_rest_url(text) == expected


# What each endpoint flag's parser is, and the form its messages end with.
ENDPOINT_FORMS: dict[str, tuple[Callable[[str, str], object], str]] = {
    "--grpc": (parse_grpc_target, "use HOST:PORT, e.g. localhost:8500 or [::1]:8500"),
    "--rest": (parse_rest_url, "use http://HOST:PORT, e.g. http://localhost:8501"),
}


@pytest.mark.parametrize(
    ("flag", "text", "problem"),
    [
        ("--grpc", "127.0.0.1:99999", "has port 99999, not a TCP port (1-65535)"),
        ("--grpc", "127.0.0.1:0", "has port 0, not a TCP port (1-65535)"),
        ("--grpc", "127.0.0.1:-1", "has no numeric port"),
        ("--grpc", "127.0.0.1", "is not HOST:PORT"),
        ("--grpc", ":8500", "is not HOST:PORT"),
        ("--grpc", "::1:8500", "is not HOST:PORT"),
        ("--grpc", "http://localhost:8500", "is a URL, but a gRPC target has no scheme"),
        ("--rest", "127.0.0.1:8501", "is not an http:// or https:// URL"),
        ("--rest", "ftp://127.0.0.1:8501", "is not an http:// or https:// URL"),
        ("--rest", "http:/127.0.0.1:8501", "is not an http:// or https:// URL"),
        ("--rest", "http://[::1", "is not a URL (Invalid IPv6 URL)"),
        ("--rest", "http://", "has no host"),
        ("--rest", "http://h:99999", "has port 99999, not a TCP port (1-65535)"),
        ("--rest", "http://h:0", "has port 0, not a TCP port (1-65535)"),
        ("--rest", "http://h:abc", "has port abc, not a TCP port (1-65535)"),
    ],
)
def test_bad_endpoints_name_the_value_and_the_form(flag: str, text: str, problem: str) -> None:
    parse, form = ENDPOINT_FORMS[flag]
    with pytest.raises(ValueError) as caught:
        parse(text, flag)
    assert str(caught.value) == f"{flag} {text!r} {problem}: {form}"


# --- request bodies --------------------------------------------------------------------------------------------

BODY = b'{"instances": [1.0]}'


@pytest.mark.parametrize("encoding", ["", "identity", "IDENTITY", " identity , "])
def test_plain_bodies_pass_as_they_are(encoding: str) -> None:
    assert decode_body(BODY, encoding, 100) == BODY


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "GZip", "gzip, identity"])
def test_gzip_bodies_are_decompressed(encoding: str) -> None:
    assert decode_body(gzip.compress(BODY), encoding, 100) == BODY


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (BODY, "incorrect header check"),
        (gzip.compress(BODY, mtime=0)[:-6], "the stream is truncated"),
        (gzip.compress(BODY, mtime=0) + b"junk", "data follows the end of the gzip stream"),
    ],
    ids=["not-gzip", "truncated", "trailing-junk"],
)
def test_a_body_that_is_not_valid_gzip_is_a_400(raw: bytes, problem: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        decode_body(raw, "gzip", 100)
    assert caught.value.http_status == 400
    assert caught.value.message.startswith("The request body is not valid gzip (Content-Encoding: gzip): ")
    assert problem in caught.value.message


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "gzip, gzip", "compress"])
def test_other_encodings_are_a_415_naming_what_is_accepted(encoding: str) -> None:
    with pytest.raises(UnsupportedMediaTypeError) as caught:
        decode_body(BODY, encoding, 100)
    assert caught.value.http_status == 415
    assert f"Content-Encoding {encoding!r} is not supported" in caught.value.message
    assert "Content-Encoding: gzip" in caught.value.message


def test_a_gzip_bomb_is_refused_at_the_limit_without_inflating_it() -> None:
    bomb = gzip.compress(b" " * (256 << 20))  # 256 MiB of spaces in ~250 KiB
    started = time.perf_counter()
    with pytest.raises(RequestTooLargeError) as caught:
        decode_body(bomb, "gzip", 1 << 20)
    assert time.perf_counter() - started < 1.0
    assert caught.value.http_status == 413
    assert caught.value.message == (
        "Request body, decompressed, is over this server's limit of 1048576 bytes (serving.max_request_mb)"
    )


# --- JSON documents --------------------------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    """A body nesting `depth` levels: the object, then depth - 1 lists."""
    return b'{"instances": ' + b"[" * (depth - 1) + b"1" + b"]" * (depth - 1) + b"}"


def test_json_nesting_up_to_the_limit_is_parsed() -> None:
    assert parse_json_body(nested(MAX_JSON_DEPTH))["instances"]
    assert MAX_JSON_DEPTH == 64


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 100_000])
def test_deeper_json_is_refused_naming_the_limit(depth: int) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        parse_json_body(nested(depth))
    assert caught.value.message == (
        "JSON Parse error: the document nests arrays and objects deeper than 64 levels, this server's limit"
    )


def test_deep_objects_count_as_levels_too() -> None:
    body = b'{"a": ' * 70 + b"1" + b"}" * 70
    with pytest.raises(InvalidArgumentError, match="deeper than 8 levels"):
        parse_json_body(body, max_depth=8)


@pytest.mark.parametrize(
    "body", [b'{"instances": ["\\ud800"]}', b'{"\\udfff": 1}', b'{"instances": [{"b64": "\\uDBFF"}]}']
)
def test_a_lone_surrogate_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(InvalidArgumentError, match="The surrogate pair in string is invalid"):
        parse_json_body(body)


def test_surrogate_pairs_and_escaped_backslashes_are_fine() -> None:
    assert parse_json_body(b'{"x": "\\ud83d\\ude00", "y": "\\\\ud800"}') == {"x": "\U0001f600", "y": "\\ud800"}


def test_an_integer_of_thousands_of_digits_is_a_parse_error() -> None:
    with pytest.raises(InvalidArgumentError, match="JSON Parse error: Exceeds the limit"):
        parse_json_body(b'{"instances": [' + b"9" * 5000 + b"]}")


def test_an_integer_beyond_any_double_is_out_of_range_for_a_float_input() -> None:
    with pytest.raises(InvalidArgumentError, match="is out of range for type: float"):
        json_to_ndarray([int("9" * 400)], dtype_of(types_pb2.DT_FLOAT))


# --- images inside serialized tf.Examples (the serving_tf_example signature) ---------------------------------


def _png_header(width: int, height: int) -> bytes:
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + len(ihdr).to_bytes(4, "big") + b"IHDR" + ihdr + b"\x00" * 4


def _example(*images: bytes) -> bytes:
    from tensorflow.core.example import example_pb2, feature_pb2

    feature = feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=list(images)))
    return example_pb2.Example(features=feature_pb2.Features(feature={"image/encoded": feature})).SerializeToString()


def test_images_inside_serialized_examples_count_toward_the_request_pixels() -> None:
    # found by the second adversarial pass over issue 35: 8 tf.Examples of a 40 MP JPEG each (1.9 MB) went past the
    # 100 MP request limit through `serving_tf_example` and held the server for 9 s; plain images were refused
    limits = RequestLimits(max_pixels=100_000_000)
    examples = np.array([_example(_png_header(6000, 6000)) for _ in range(3)], dtype=object)
    with pytest.raises(InvalidArgumentError, match=r"3 image\(s\) declare 108000000 pixels in total"):
        limits.check_images({"examples": examples})
    with pytest.raises(InvalidArgumentError, match=r"2 image\(s\) declare 72000000 pixels"):
        RequestLimits(max_pixels=50_000_000).check_images(
            {"examples": np.array([_example(_png_header(6000, 6000), _png_header(6000, 6000))], dtype=object)}
        )


def test_examples_and_text_under_the_limit_still_pass() -> None:
    limits = RequestLimits(max_pixels=100_000_000, max_pixels_per_byte=0)  # a bare header: the total alone
    values = [_example(_png_header(6000, 6000)), _example(b"not an image"), b"plain text", b"\xff\x00garbage"]
    limits.check_images({"examples": np.array(values, dtype=object)})


# --- decoded pixels per byte of image data ----------------------------------------------------------------------


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def _solid_png(side: int) -> bytes:
    return _png(np.zeros((side, side), np.uint8))


def test_flat_images_decoding_to_gigabytes_from_kilobytes_are_refused() -> None:
    # found by the second adversarial pass over issue 35 (B15): two solid 6300 x 6300 PNGs, each under the 40 MP
    # per-image limit and 79 MP together under the 100 MP request limit, in a 103 KB request: 2 s of the server's
    # CPU and 1.6 GB, what two 40 MP photos cost in 20 MB
    png = _solid_png(6300)
    with pytest.raises(InvalidArgumentError) as raised:
        RequestLimits().check_pixels([png, png])
    idat = len(png) - 57  # less the signature, IHDR, IEND and the IDAT chunk's framing
    assert str(raised.value).startswith(f"the request's image(s) declare 79380000 pixels in {2 * idat} bytes of image")
    assert "over this server's limit of 64 pixels a byte" in str(raised.value)
    assert "(serving.max_pixels_per_byte)" in str(raised.value)
    RequestLimits(max_pixels_per_byte=0).check_pixels([png, png])  # 0 = no limit


def _chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")


def test_padding_and_metadata_do_not_count_as_image_data() -> None:
    # found by the third adversarial pass over issue 35 (N1): the same two flat PNGs with 650 KB of zeros after
    # IEND, or a 1.3 MB tEXt chunk, in a 2.2 KB gzip body, were answered 200 after 4 s of CPU and +1.6 GB
    png = _solid_png(6300)
    padded = png + b"\0" * 650_000
    text = png[:33] + _chunk(b"tEXt", b"c\0" + b"\0" * 650_000) + png[33:]
    for images in ([padded, padded], [text, text]):
        with pytest.raises(InvalidArgumentError, match=r"pixels a byte; metadata and padding do not count\), over"):
            RequestLimits().check_pixels(images)


def test_a_jpeg_counts_its_scans_and_tables_not_its_comments() -> None:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((64, 64), np.uint8)).save(buffer, "JPEG")
    jpeg = buffer.getvalue()
    comment = b"\xff\xfe" + (2 + 60_000).to_bytes(2, "big") + b"\0" * 60_000
    thumbnail = b"\xff\xe1" + (2 + len(jpeg)).to_bytes(2, "big") + jpeg  # an EXIF-like APP1 holding a JPEG
    padded = jpeg[:2] + thumbnail + comment + jpeg[2:] + b"\0" * 60_000
    assert image_data_bytes(padded) == image_data_bytes(jpeg) == len(jpeg) - 18  # less its JFIF APP0 segment
    assert image_data_bytes(b"GIF89a" + b"\0" * 20) == 26  # other formats: the whole file


def test_flat_images_up_to_16_mp_a_request_and_dense_ones_pass() -> None:
    flat = _solid_png(4096)  # 16.8 MP of one color: a 4K frame or a 12 MP photo, however flat, always passes
    RequestLimits().check_pixels([flat])
    dense = _png(np.random.default_rng(0).integers(0, 256, (3000, 2000), np.uint8))  # 6 MP, a byte a pixel
    RequestLimits().check_pixels([dense, dense, dense, flat])  # 34.8 MP in 18 MB


def test_images_over_the_models_own_limit_are_left_to_its_message() -> None:
    # the model's graph refuses a 72 MP image from its header ("... over the limit of 40000000 pixels per image
    # ... trainer.max_image_pixels"), a clearer message, and decodes nothing
    RequestLimits().check_pixels([_png_header(9000, 8000)])
