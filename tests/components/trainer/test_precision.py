"""resolve_precision: what `auto` picks for which GPUs, and the notes on explicit choices."""

from __future__ import annotations

import pytest

from components.trainer.precision import PRECISIONS, resolve_precision


def test_auto_without_gpu_is_float32_and_says_why() -> None:
    policy, reason = resolve_precision("auto", [])
    assert policy == "float32"
    assert "no GPU" in reason


@pytest.mark.parametrize(
    ("capabilities", "lowest"),
    [([(7, 0)], "7.0"), ([(8, 0)] * 8, "8.0"), ([(9, 0), (7, 5)], "7.5")],
)
def test_auto_picks_mixed_float16_when_every_gpu_has_tensor_cores(
    capabilities: list[tuple[int, int]], lowest: str
) -> None:
    policy, reason = resolve_precision("auto", capabilities)
    assert policy == "mixed_float16"
    assert f"lowest {lowest}" in reason


@pytest.mark.parametrize("capabilities", [[(6, 1)], [(8, 0), (6, 0)], [(3, 7)]])
def test_auto_falls_back_to_float32_when_any_gpu_is_older_than_volta(capabilities: list[tuple[int, int]]) -> None:
    policy, reason = resolve_precision("auto", capabilities)
    assert policy == "float32"
    assert f"{min(capabilities)[0]}.{min(capabilities)[1]} < 7.0" in reason


@pytest.mark.parametrize("requested", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("capabilities", [[], [(6, 0)], [(7, 0)], [(8, 0)]])
def test_explicit_policies_pass_through(requested: str, capabilities: list[tuple[int, int]]) -> None:
    policy, reason = resolve_precision(requested, capabilities)
    assert policy == requested
    assert reason.startswith(f"requested {requested}")


def test_explicit_mixed_precision_without_gpu_warns_it_is_slow() -> None:
    assert "slow" in resolve_precision("mixed_float16", [])[1]
    assert "slow" in resolve_precision("mixed_bfloat16", [])[1]


def test_explicit_bfloat16_on_pre_ampere_gpu_warns_no_speed_up() -> None:
    _, reason = resolve_precision("mixed_bfloat16", [(7, 0)])
    assert "7.0 < 8.0" in reason
    assert "no speed-up" in reason
    _, reason = resolve_precision("mixed_bfloat16", [(8, 0)])
    assert "no speed-up" not in reason


def test_float32_on_tensor_core_gpus_mentions_what_auto_would_pick() -> None:
    assert "auto would pick mixed_float16" in resolve_precision("float32", [(8, 0)])[1]
    assert "auto would pick" not in resolve_precision("float32", [])[1]


def test_unknown_precision_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"trainer.precision='fp8' is not supported; use one of: auto, float32"):
        resolve_precision("fp8", [])
    assert set(PRECISIONS) == {"auto", "float32", "mixed_float16", "mixed_bfloat16"}


@pytest.mark.parametrize("requested", PRECISIONS)
def test_every_precision_the_trainer_section_accepts_resolves(requested: str) -> None:
    policy, reason = resolve_precision(requested, [(8, 0)])
    assert policy in PRECISIONS and policy != "auto"
    assert reason
