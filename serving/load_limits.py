"""What a load test may be asked to do, checked before anything heavy is imported (`tfxp loadtest` refuses at once,
not after TensorFlow's start-up).

Example:
    check_load(concurrency=16, seconds=10, images_per_request=1)
"""

from __future__ import annotations

from foundation.errors import TfxpError

# The most workers one load generator runs. It is one process (one asyncio loop, one core): past about a thousand
# requests in flight it measures its own queue, not the server, and each worker holds a request, a connection and
# its buffers (a million took 1.9 GB and finished no request). More load: several generators.
MAX_CONCURRENCY = 1024


class LoadTestError(TfxpError, ValueError):
    """A load test that cannot run as asked (arguments), or that made no request, so measured nothing."""


def check_load(concurrency: int, seconds: float, images_per_request: int) -> None:
    """Refuses a load test that cannot run or cannot measure.

    Raises:
        LoadTestError: concurrency past MAX_CONCURRENCY, or a non-positive concurrency, duration or batch.
    """
    if concurrency > MAX_CONCURRENCY:
        raise LoadTestError(
            f"concurrency {concurrency} is more than one load generator runs ({MAX_CONCURRENCY}): past that it "
            f"measures its own queue, not the server; pass --concurrency {MAX_CONCURRENCY} or less, and run several "
            "generators for more load"
        )
    if concurrency < 1 or seconds <= 0 or images_per_request < 1:
        raise LoadTestError(
            f"concurrency ({concurrency}), seconds ({seconds}) and images_per_request ({images_per_request}) "
            "must be positive"
        )
