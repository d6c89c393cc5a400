"""The report against what a run or its data can hand it: a resumed Trainer, class names with bidi controls or
300 characters, an output that could not be read where no timeline says what ran."""

from __future__ import annotations

import re

import pytest
from report_fixtures import run_summary, section_of

from components.report.build import build_page, report_html
from components.report.facts import RunFacts
from components.report.inputs import NO_METADATA
from components.report.page import Lead, Missing

# Unicode's bidi formatting characters: embeddings and overrides, isolates, marks, the Arabic letter mark.
BIDI = [*"\u202a\u202b\u202c\u202d\u202e", *"\u2066\u2067\u2068\u2069", *"\u200e\u200f\u061c"]
LONG = "n" * 299 + "!"


def _page_with_class(name: str) -> str:
    """The report of a run whose data, confusion matrix and misclassified image show a class called `name`."""
    facts = RunFacts(
        "/out",
        run_summary(),
        splits={"train": {"examples": 3, "classes": {name: 2, "dog": 1}}},
        confusion={"labels": [name, "dog"], "matrix": [[3, 1], [0, 4]]},
        misclassified=[{"png": "iVBORw0KGgo=", "true": name, "predicted": "dog", "confidence": 0.9}],
        misclassified_scanned=10,
    )
    return report_html(facts)


def test_a_resumed_trainer_shows_the_steps_it_restored_too() -> None:
    training = {"model": "small_resnet", "steps": 30, "steps_restored": 50, "images_per_second": 900.0}
    facts = RunFacts("/out", run_summary(metrics={"accuracy": 0.97, "training": training}))

    (lead,) = [block for block in section_of(build_page(facts), "training").blocks if isinstance(block, Lead)]

    assert lead.text == (
        "small_resnet: 80 steps (30 this run, 50 restored from an interrupted run's backup) at 900 images/s"
    )


@pytest.mark.parametrize("control", BIDI)
def test_bidi_controls_in_class_names_are_shown_not_obeyed(control: str) -> None:
    page = _page_with_class(f"cat{control}gpj.exe")

    assert control not in page
    assert f"cat\\u{ord(control):04x}gpj.exe" in page  # in the table, the plots' text and under the image


def test_control_characters_from_a_summary_are_shown_as_escapes_not_written_raw() -> None:
    # ESC and BEL in the blessing reason and the pushed path reached the page raw (fourth adversarial pass).
    facts = RunFacts("/out", run_summary(blessing_reason="ok\x1b[31m\x07", pushed_model_dir="/srv/1\x1b]0;x\x07"))

    page = report_html(facts)

    assert "\x1b" not in page and "\x07" not in page
    assert "ok\\x1b[31m\\x07" in page


def test_a_300_character_class_name_is_cut_with_the_whole_name_in_its_tooltip() -> None:
    page = _page_with_class(LONG)

    cut = "n" * 39 + "…"
    assert f'<td><span class="name" title="{LONG}">{cut}</span></td>' in page
    assert f">true {cut} → dog (90%)<" in page
    # The whole name is only in attributes (the tooltip, the image's alt text), never shown as text.
    shown = re.sub(r'"[^"]*"', '""', page)
    assert LONG not in shown and "n" * 41 not in shown


def test_an_unreadable_output_is_blamed_on_the_read_not_on_a_component_that_did_not_run() -> None:
    """The RunReport component has no timeline: an output it could not read is said as such, with the path."""
    problem = {
        "component": "Trainer",
        "path": "/root/Trainer/model/5/training_metrics.json",
        "error": "cannot read the training metrics: JSONDecodeError: Expecting value",
    }
    facts = RunFacts("/out", run_summary(problems=[problem]))
    facts.not_available = {"components": NO_METADATA.format(what="when each component started")}

    missing = [block.text for block in section_of(build_page(facts), "training").blocks if isinstance(block, Missing)]

    assert missing == [
        "No training metrics: cannot read the training metrics: JSONDecodeError: Expecting value "
        "(/root/Trainer/model/5/training_metrics.json)"
    ]


def test_a_component_the_report_got_nothing_from_is_not_said_to_have_stopped_the_run() -> None:
    facts = RunFacts("/out", run_summary())
    facts.not_available = {"components": NO_METADATA.format(what="when each component started")}

    missing = [block.text for block in section_of(build_page(facts), "data").blocks if isinstance(block, Missing)]

    assert "No example counts: StatisticsGen did not run in this pipeline (the RunReport got no output of it)." in (
        missing
    )
    assert not any("the run stopped before it" in text for text in missing)
