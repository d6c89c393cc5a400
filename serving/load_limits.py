"""What a load test may be asked to do, checked before anything heavy is imported (`tfxp loadtest` refuses at once,
not after TensorFlow's start-up).

Example:
    check_load(concurrency=16, seconds=10, images_per_request=1)
"""

from __future__ import annotations

from collections.abc import Sequence

from foundation.errors import TfxpError

# The most workers one load generator runs. It is one process (one asyncio loop, one core): past about a thousand
# requests in flight it measures its own queue, not the server, and each worker holds a request, a connection and
# its buffers (a million took 1.9 GB and finished no request). More load: several generators.
MAX_CONCURRENCY = 1024
# The most images one request of the load test carries: servers batch far fewer (`serving.max_batch_size`, 32 by
# default; TF Serving's batching configs a few hundred), and the generator builds every request before it starts:
# `--batch 100000000` took 14.6 GB and never sent one.
MAX_IMAGES_PER_REQUEST = 4096
# The most bytes of images the generator prepares in all (each image is in `images_per_request` of the prepared
# requests, one starting at each image).
MAX_PREPARED_BYTES = 1024 * 1024 * 1024


class LoadTestError(TfxpError, ValueError):
    """A load test that cannot run as asked (arguments), or that made no request, so measured nothing."""


def check_load(concurrency: int, seconds: float, images_per_request: int) -> None:
    """Refuses a load test that cannot run or cannot measure.

    Raises:
        LoadTestError: concurrency past MAX_CONCURRENCY, a batch past MAX_IMAGES_PER_REQUEST, or a non-positive
            concurrency, duration or batch.
    """
    if concurrency > MAX_CONCURRENCY:
        raise LoadTestError(
            f"concurrency {concurrency} is more than one load generator runs ({MAX_CONCURRENCY}): past that it "
            f"measures its own queue, not the server; pass --concurrency {MAX_CONCURRENCY} or less, and run several "
            "generators for more load"
        )
    if images_per_request > MAX_IMAGES_PER_REQUEST:
        raise LoadTestError(
            f"{images_per_request} images per request is more than the load test sends in one request "
            f"({MAX_IMAGES_PER_REQUEST}; servers batch far fewer, tfxp serve serving.max_batch_size); pass --batch "
            f"{MAX_IMAGES_PER_REQUEST} or less"
        )
    if concurrency < 1 or seconds <= 0 or images_per_request < 1:
        raise LoadTestError(
            f"concurrency ({concurrency}), seconds ({seconds}) and images_per_request ({images_per_request}) "
            "must be positive"
        )


def check_prepared(image_bytes: int, images_per_request: int) -> None:
    """Refuses a load test whose prepared requests would hold more than MAX_PREPARED_BYTES of images:
    `image_bytes` (all the images' bytes) times `images_per_request`.

    Raises:
        LoadTestError: naming the bytes, the limit and the fix.
    """
    prepared = image_bytes * images_per_request
    if prepared > MAX_PREPARED_BYTES:
        raise LoadTestError(
            f"the load test would prepare {prepared} bytes of requests ({image_bytes} bytes of images, each in "
            f"{images_per_request} requests), more than its limit of {MAX_PREPARED_BYTES}; pass a smaller --batch "
            "or fewer or smaller --image files"
        )


def check_arguments(images: Sequence[bytes], concurrency: int, seconds: float, images_per_request: int) -> None:
    """Refuses a load test over `images` that cannot run or cannot measure: `check_load` and `check_prepared`.

    Raises:
        LoadTestError: no images, or see `check_load` and `check_prepared`.
    """
    if not images:
        raise LoadTestError("the load test needs at least one image")
    check_load(concurrency, seconds, images_per_request)
    check_prepared(sum(map(len, images)), images_per_request)
