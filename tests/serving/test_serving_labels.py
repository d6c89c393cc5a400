"""Version labels on the local server follow TF Serving's ServerCore (model_servers/server_core.cc at 9d981c5).

`ReloadConfig` (server_core.cc:476-547) checks the labels (`UpdateModelVersionLabelMap`, :514, :549-612) before it
adds or updates the models (:524): a label check that fails fails the whole config, so the version it would add
never loads. A label may point at a version that is not AVAILABLE only under
--allow_version_labels_for_unavailable_models and only while the label is not in use with another version
(:563-571), or under --force_allow_any_version_labels_for_unavailable_models (:561-562); otherwise the version
must be AVAILABLE (:574-584).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.errors import FailedPreconditionError, NotFoundError
from serving.manager import State
from serving.model_config import ModelConfig, VersionPolicy
from serving.options import ServingOptions
from serving.server_core import ServerCore
from serving.server_options import server_options

UNAVAILABLE = r"Request to assign label to version {} of model m, which is not currently available for inference"


class FakeServable:
    def __init__(self, name: str, version: int) -> None:
        self.name, self.version = name, version

    def close(self) -> None:
        pass


def load(name: str, version: int, path: Path) -> FakeServable:
    return FakeServable(name, version)


def config(base: Path, versions: tuple[int, ...], **labels: int) -> ModelConfig:
    return ModelConfig("m", base, VersionPolicy("specific", versions=versions), labels)


def served_by(core: ServerCore, label: str | None = None, version: int | None = None) -> int:
    with core.acquire("m", version=version, label=label) as servable:
        return servable.version


@pytest.fixture
def base(tmp_path: Path) -> Path:
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
    return tmp_path


def serving_v1(base: Path, **flags: bool) -> ServerCore:
    """A core serving version 1 with `stable` on it (the first config allowed by the flag)."""
    core = ServerCore([config(base, (1,), stable=1)], load, allow_labels_for_unavailable_models=True, **flags)
    core.poll()
    assert served_by(core, "stable") == 1
    return core


def test_a_labelled_first_config_needs_the_flag_since_labels_are_checked_before_the_first_load(base: Path) -> None:
    # ServerCore::Create → ReloadConfig (server_core.cc:287): the label map (:514) is built before any model is
    # added (:524), so no version is AVAILABLE yet and the check at :574-584 fails; TF Serving does not start.
    with pytest.raises(FailedPreconditionError, match=UNAVAILABLE.format(1)):
        ServerCore([config(base, (1,), stable=1)], load)
    # With the flag no label is in use yet (:563-571), so any label of the first config is accepted.
    core = ServerCore([config(base, (1,), stable=1)], load, allow_labels_for_unavailable_models=True)
    core.poll()
    assert served_by(core, "stable") == 1


def test_one_write_that_adds_a_version_and_moves_the_in_use_label_is_refused_and_the_version_never_loads(
    base: Path,
) -> None:
    core = serving_v1(base)
    promote_at_once = config(base, (1, 2), stable=2)
    for _ in range(3):  # every poll of the models.config retries it, and is refused the same way
        # `stable` is in use with version 1 (server_core.cc:565-569), so version 2 must be AVAILABLE (:574-584);
        # it is not, because the refused config's policy never reaches the model (:514 returns before :524).
        with pytest.raises(FailedPreconditionError, match=UNAVAILABLE.format(2)):
            core.reload([promote_at_once])
        core.poll()
        manager = core.model("m")
        assert manager is not None
        assert manager.available_versions() == [1] and 2 not in manager.states()
        assert served_by(core, "stable") == 1


def test_a_promotion_in_two_phases_succeeds(base: Path) -> None:
    core = serving_v1(base)
    core.reload([config(base, (1, 2), stable=1)])  # phase 1: add version 2, `stable` stays on 1
    core.poll()
    manager = core.model("m")
    assert manager is not None and manager.states()[2].state is State.AVAILABLE
    assert served_by(core, "stable") == 1
    core.reload([config(base, (1, 2), stable=2)])  # phase 2: version 2 is AVAILABLE, the label may move
    assert served_by(core, "stable") == 2
    core.reload([config(base, (2,), stable=2)])  # and version 1 may go
    core.poll()
    assert manager.available_versions() == [2]


def test_a_label_not_in_use_may_point_at_a_version_still_loading(base: Path) -> None:
    core = serving_v1(base)
    core.reload([config(base, (1, 2), stable=1, canary=2)])  # `canary` is new: allowed (server_core.cc:563-571)
    # The label map is swapped in (:610-611) before the version loads, so the label answers NOT_FOUND meanwhile.
    with pytest.raises(NotFoundError, match=r"Servable not found for request: Specific\(m, 2\)"):
        served_by(core, "canary")
    core.poll()
    assert served_by(core, "canary") == 2


def test_without_the_flag_every_label_needs_an_available_version(base: Path) -> None:
    core = ServerCore([config(base, (1, 2))], load)
    core.poll()
    core.reload([config(base, (1, 2), stable=1, canary=2)])  # both AVAILABLE: accepted (server_core.cc:574-584)
    (base / "3").mkdir()
    with pytest.raises(FailedPreconditionError, match=UNAVAILABLE.format(3)):
        core.reload([config(base, (1, 2, 3), stable=1, canary=2, nightly=3)])  # a new label, too
    assert (served_by(core, "stable"), served_by(core, "canary")) == (1, 2)


def test_force_allow_lets_an_in_use_label_move_to_a_version_not_loaded(base: Path) -> None:
    core = serving_v1(base, force_allow_any_labels_for_unavailable_models=True)
    core.reload([config(base, (1, 2), stable=2)])  # server_core.cc:561-562
    core.poll()
    assert served_by(core, "stable") == 2


def test_a_refused_config_neither_adds_nor_removes_models(base: Path, tmp_path: Path) -> None:
    (tmp_path / "k" / "1").mkdir(parents=True)
    kept = ModelConfig("k", tmp_path / "k")
    core = ServerCore([config(base, (1,), stable=1), kept], load, allow_labels_for_unavailable_models=True)
    core.poll()
    with pytest.raises(FailedPreconditionError, match=UNAVAILABLE.format(2)):
        core.reload([config(base, (1, 2), stable=2), ModelConfig("n", tmp_path / "n")])  # drops k, adds n
    core.poll()
    # Nothing of the refused config was applied (server_core.cc:514 returns before :524).
    assert core.model("n") is None
    assert [manager.config.name for manager in core.models()] == ["m", "k"]
    with core.acquire("k") as servable:
        assert servable.version == 1


def test_a_request_without_a_version_goes_to_the_newest_loaded_version(base: Path) -> None:
    # TF Serving's ServableRequest::Latest for a ModelSpec with no version or label (server_core.cc:865-867):
    # with stable on 1 and 2 loaded too, unlabelled traffic goes to 2.
    core = ServerCore([config(base, (1, 2), stable=1)], load, allow_labels_for_unavailable_models=True)
    core.poll()
    assert (served_by(core), served_by(core, "stable"), served_by(core, version=1)) == (2, 1, 1)


def test_tfxp_serve_sets_the_flag_for_labelled_configs_as_the_deploy_assets_do() -> None:
    # serving/deploy.py:144-147 gives TF Serving --allow_version_labels_for_unavailable_models when labels are set.
    def flag(options: ServingOptions, labelled_config: bool = False) -> bool:
        return server_options(options, labelled_config=labelled_config).allow_version_labels_for_unavailable_models

    assert flag(ServingOptions(version_policy="specific", stable_version=1))
    assert flag(ServingOptions(), labelled_config=True)  # `tfxp serve --model-config-file` with labels
    assert not flag(ServingOptions())
