"""The digits run's report in headless Chromium: no console error, every section, every plot drawn with a size,
no request leaving the file, and screenshots at desktop and phone width.

The report is built from the facts of a real digits run (`tests/golden/report_digits_facts.json`). A copy of it
gets a probe script (allowed by a nonce added to the page's Content-Security-Policy, nothing else changed) that
records errors, CSP violations, each plot's rendered box and the resources loaded, and writes them into the DOM,
which `chromium --dump-dom` prints. Skipped when no Chromium is installed (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.report.build import build_page
from components.report.facts import RunFacts
from components.report.page import SECTION_IDS
from components.report.render import CONTENT_SECURITY_POLICY, render_page

CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium found, browser tests skipped; install Debian's: apt-get install -y chromium",
)
FACTS = Path(__file__).resolve().parents[2] / "golden" / "report_digits_facts.json"
NONCE = "tfxp-probe"
PROBE = """<script nonce="__NONCE__">
(function () {
  var errors = [], violations = [];
  window.addEventListener("error", function (event) { errors.push(String(event.message)); });
  document.addEventListener("securitypolicyviolation", function (event) {
    violations.push(event.violatedDirective + " " + event.blockedURI);
  });
  window.addEventListener("load", function () {
    var box = function (element) { var r = element.getBoundingClientRect(); return [r.width, r.height]; };
    var result = {
      errors: errors,
      violations: violations,
      sections: Array.prototype.map.call(document.querySelectorAll("main > section"), function (s) { return s.id; }),
      plots: Array.prototype.map.call(document.querySelectorAll("svg.plot"), function (svg) {
        return {plot: svg.getAttribute("data-plot"), box: box(svg), title: svg.querySelector("title").textContent};
      }),
      images: Array.prototype.map.call(document.querySelectorAll("img"), function (img) {
        return {loaded: img.complete && img.naturalWidth > 0, box: box(img), alt: img.alt};
      }),
      resources: performance.getEntriesByType("resource").map(function (entry) { return entry.name; })
    };
    var out = document.createElement("pre");
    out.id = "tfxp-probe";
    out.textContent = JSON.stringify(result);
    document.body.appendChild(out);
  });
})();
</script>""".replace("__NONCE__", NONCE)
# Root needs --no-sandbox; the rest keeps Chromium from reaching out on its own (updates, sync, QUIC probes).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs headless Chromium on a local file with a fresh profile."""
    command = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def with_probe(document: str) -> str:
    """The page with the probe script, its CSP allowing exactly that script."""
    policy = f"{CONTENT_SECURITY_POLICY}; script-src 'nonce-{NONCE}'"
    probed = document.replace(f'content="{CONTENT_SECURITY_POLICY}"', f'content="{policy}"', 1)
    assert probed != document
    return probed.replace("</head>", PROBE + "\n</head>", 1)


def probe(page: Path, profile: Path) -> tuple[dict[str, Any], str]:
    """What the probe recorded, and Chromium's log."""
    result = chromium(page, profile, "--virtual-time-budget=5000", "--dump-dom")
    found = re.search(r'<pre id="tfxp-probe">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found, f"no probe output; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    return json.loads(
        found[1].replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    ), (result.stderr)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits run's report, as `tfxp report` writes it."""
    directory = tmp_path_factory.mktemp("report")
    page = directory / "report.html"
    page.write_text(render_page(build_page(RunFacts.from_json(FACTS.read_text()))), encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def probed(report: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    page = report.with_name("probed.html")
    page.write_text(with_probe(report.read_text(encoding="utf-8")), encoding="utf-8")
    return probe(page, tmp_path_factory.mktemp("profile"))


def _console_errors(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if "CONSOLE" in line and re.search(r"Uncaught|Refused|violates|blocked|Error", line)
    ]


def test_no_console_error_and_no_request_leaves_the_file(probed: tuple[dict[str, Any], str]) -> None:
    result, log = probed
    assert result["errors"] == []
    assert result["violations"] == []
    assert _console_errors(log) == []
    assert [name for name in result["resources"] if not name.startswith("data:")] == []


def test_every_section_is_present_in_order(probed: tuple[dict[str, Any], str]) -> None:
    assert probed[0]["sections"] == list(SECTION_IDS)


def test_every_plot_and_image_is_drawn_with_a_size(probed: tuple[dict[str, Any], str]) -> None:
    result = probed[0]
    plots = {plot["plot"]: plot for plot in result["plots"]}
    assert set(plots) == {"classes", "curves", "accuracy", "confusion", "timeline", "history"}
    for plot in plots.values():
        width, height = plot["box"]
        assert width > 300 and height > 100, plot
        assert plot["title"]
    assert result["images"], "the misclassified images"
    assert all(image["loaded"] and image["box"][0] > 0 and image["alt"] for image in result["images"])


def test_a_request_to_the_network_would_be_caught(report: Path, tmp_path: Path) -> None:
    # The checks above can fail: the same page with one remote image reports a CSP violation and a console error.
    leaky = tmp_path / "leaky.html"
    document = with_probe(report.read_text(encoding="utf-8"))
    leaky.write_text(document.replace("<main>", '<main><img src="http://192.0.2.1/x.png" alt="remote">', 1))

    result, log = probe(leaky, tmp_path / "profile")

    assert result["violations"] == ["img-src http://192.0.2.1/x.png"]
    assert _console_errors(log)


@pytest.mark.parametrize(("name", "width"), [("desktop", 1280), ("phone", 390)])
def test_screenshots(report: Path, tmp_path: Path, name: str, width: int) -> None:
    shot = tmp_path / f"report-{name}.png"
    result = chromium(report, tmp_path / "profile", f"--window-size={width},4000", f"--screenshot={shot}")

    assert shot.is_file(), result.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (width, 4000)
        # Not a blank page: the header's verdict badge and the plots give many colours.
        assert len(image.convert("RGB").getcolors(maxcolors=1_000_000) or []) > 50
