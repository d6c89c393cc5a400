"""A local Prometheus (Debian's `prometheus` binary) scraping local servers: what `make demo-rollout` and the
rollout tests read the canary's evidence from.

The scrape config labels each target with its `track` (stable or canary), as the rendered Kubernetes objects
label the pods, and scrapes TF Serving's metrics path every `scrape_seconds`.

Example:
    with LocalPrometheus({"stable": "127.0.0.1:8501", "canary": "127.0.0.1:8601"}, workdir) as prometheus:
        prometheus.wait_for_scrapes()
        PrometheusSignals(prometheus.url, 60).signals("digits", 7)
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from foundation.bounded import parse_json, read_capped, size_text
from foundation.errors import TfxpError
from foundation.redirects import open_url
from serving.rollout.evidence import MAX_ANSWER_BYTES

BINARY = "prometheus"


def prometheus_binary() -> str | None:
    """The `prometheus` binary on PATH, or None (install Debian's package: `apt-get install prometheus`)."""
    return shutil.which(BINARY)


class LocalPrometheus:
    """A Prometheus process scraping `targets` (track → `host:port`), its data in `workdir`, until closed."""

    def __init__(
        self,
        targets: Mapping[str, str],
        workdir: Path,
        metrics_path: str = "/monitoring/prometheus/metrics",
        scrape_seconds: float = 1.0,
    ) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise TfxpError("no prometheus binary on PATH; install Debian's package: apt-get install prometheus")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        config.write_text(_config(targets, metrics_path, scrape_seconds), encoding="utf-8")
        self._log = open(workdir / "prometheus.log", "wb")  # noqa: SIM115  (closed in close())
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._targets = dict(targets)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Waits until Prometheus answers `/-/ready`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise TfxpError(f"prometheus exited with {self._process.returncode}; see {self._log.name}")
            try:
                with open_url(f"{self.url}/-/ready", 2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TfxpError(f"prometheus not ready after {timeout:.0f}s; see {self._log.name}")

    def wait_for_scrapes(self, count: int = 2, timeout: float = 60.0) -> None:
        """Waits until every target was scraped `count` times and is up."""
        deadline = time.monotonic() + timeout
        query = f"count_over_time(up[5m]) >= {count}"
        too_large = TfxpError(f"prometheus at {self.url} answered more than {size_text(MAX_ANSWER_BYTES)}")
        while time.monotonic() < deadline:
            address = f"{self.url}/api/v1/query?query={urllib.parse.quote(query)}"
            try:
                with open_url(address, 5) as answer:
                    body = read_capped(answer.read, MAX_ANSWER_BYTES, lambda: too_large)
                result = parse_json(body)["data"]["result"]
                if len(result) == len(self._targets):
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TfxpError(f"prometheus did not scrape {sorted(self._targets)} {count} times in {timeout:.0f}s")

    def close(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()

    def __enter__(self) -> LocalPrometheus:
        self.wait_ready()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _config(targets: Mapping[str, str], metrics_path: str, scrape_seconds: float) -> str:
    interval = f"{max(1, round(scrape_seconds))}s"
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}", "scrape_configs:"]
    lines += [
        "  - job_name: tfxp-serving",
        f"    metrics_path: {json.dumps(metrics_path)}",
        "    static_configs:",
    ]
    for track, target in sorted(targets.items()):
        lines += [f"      - targets: [{json.dumps(target)}]", f"        labels: {{track: {json.dumps(track)}}}"]
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
