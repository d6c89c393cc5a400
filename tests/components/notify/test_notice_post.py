"""`post_notice` sends the run notice to `kubeflow.notify_url` only (issue 35): a redirect to another origin is
not followed (urllib would turn a 302 into a GET there), and the notice says why it was not delivered."""

from __future__ import annotations

import pytest
from http_double import json_answer, moved, recording, redirect_to

from components.notify.notice import post_notice

PAYLOAD = {"text": "tfxp-digits: succeeded", "pipeline": "tfxp-digits"}


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_notice_is_not_sent_to_another_origin(status: int) -> None:
    with (
        recording(json_answer()) as (other, other_seen),
        recording(redirect_to(f"{other}/hook", status)) as (receiver, _),
    ):
        result = post_notice(f"{receiver}/services/T0/B0/secret", PAYLOAD, timeout=5)
    assert not result.delivered
    assert result.error is not None and f"a redirect to {other}/hook, another origin" in result.error
    assert other_seen == []


def test_a_redirect_within_the_receiver_is_followed() -> None:
    with recording(moved("/old", "/new", 308, then=(200, {}, b"ok"))) as (receiver, seen):
        result = post_notice(f"{receiver}/old", PAYLOAD, timeout=5)
    assert result.delivered, result.error
    assert [(r.method, r.path) for r in seen] == [("POST", "/old"), ("POST", "/new")]
    assert seen[0].body == seen[1].body
