"""The path rules at the command line (`foundation.path_rules`): a data glob that leaves data.path and an output
that would overwrite an input each end in one message, exit 2, before anything is read or written."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import CliRunner, Result

from pipeline.cli import app

REPO = Path(__file__).resolve().parents[2]
DATA_SETS = ("--set", "data.split=folders", "--set", "data.label_offset=0")


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(result: Result, *phrases: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for phrase in phrases:
        assert phrase in " ".join(result.output.split()), result.output


def test_compile_never_writes_over_its_own_config(tmp_path: Path) -> None:
    config = tmp_path / "my.yaml"
    config.write_text((REPO / "configs" / "default.yaml").read_text())
    (tmp_path / "link.yaml").symlink_to(config)
    (tmp_path / "sub").mkdir()
    before = _digest(config)

    for given, out in ((config, config), (tmp_path / "link.yaml", tmp_path / "sub" / ".." / "my.yaml")):
        # The data is named so that compile would succeed (and write) if the output were not refused.
        result = _invoke("compile", "--config", given, *DATA_SETS, "--out", out)
        _refused(result, f"--out {out} is the file --config {given} that this command reads", "give --out another")
    assert _digest(config) == before


def test_a_data_pattern_that_leaves_data_path_is_refused() -> None:
    result = _invoke(
        "compile", "--set", "data.train_pattern=../../../../etc/*", "--set", "data.eval_pattern=eval/*", "--out", "x"
    )
    _refused(result, "data.train_pattern = '../../../../etc/*' leaves the folder", "no .. that leaves it")


def test_edge_convert_never_writes_into_the_saved_model(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"graph")

    result = _invoke("edge", "convert", model, "--out", model / "saved_model.pb", "--mode", "none")

    _refused(result, f"--out {model / 'saved_model.pb'} lies in the folder SAVED_MODEL", "give --out a path outside")
    assert (model / "saved_model.pb").read_bytes() == b"graph"
    _refused(_invoke("edge", "convert", model, "--out", model / "m.tflite"), "lies in the folder SAVED_MODEL")


def test_loadtest_never_writes_its_result_over_the_image(tmp_path: Path) -> None:
    image = tmp_path / "x.png"
    image.write_bytes(b"\x89PNG")

    result = _invoke("loadtest", "--rest", "http://127.0.0.1:1", "--image", image, "--json", image)

    _refused(result, f"--json {image} is the file --image {image}")
    assert image.read_bytes() == b"\x89PNG"


def test_report_never_writes_over_what_it_reads(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "tfxp-digits").mkdir(parents=True)
    (out / "run-summary.json").write_text("{}")

    _refused(_invoke("report", out, "--out", out / "run-summary.json"), "is the file OUT's run-summary.json")
    assert (out / "run-summary.json").read_text() == "{}"
    _refused(_invoke("report", out, "--out", out / "tfxp-digits" / "metadata.db"), "lies in the folder OUT's")


def test_deploy_assets_never_writes_over_its_own_config(tmp_path: Path) -> None:
    # found by the hardening pass over issue 35: the Service manifest was written over the config it was made from
    out = tmp_path / "deploy"
    config = out / "kubernetes" / "service.yaml"
    config.parent.mkdir(parents=True)
    config.write_text((REPO / "configs" / "default.yaml").read_text())
    (tmp_path / "link.yaml").symlink_to(config)
    before = _digest(config)

    for given in (config, tmp_path / "link.yaml"):
        result = _invoke("deploy-assets", "--out", out, "--config", given)
        _refused(result, f"--out {config} is the file --config {given} that this command reads", "give --out another")
    assert _digest(config) == before
    assert sorted(path.name for path in out.rglob("*")) == ["kubernetes", "service.yaml"]  # nothing written
    assert _invoke("deploy-assets", "--out", out / "elsewhere", "--config", config).exit_code == 0


def test_deploy_assets_removes_only_the_warnings_it_wrote(tmp_path: Path) -> None:
    digest = "@sha256:" + "a" * 64
    by_digest = ("--set", f"serving.cpu_image=tensorflow/serving{digest}", "--set", f"serving.gpu_image=tf/gpu{digest}")
    warnings = tmp_path / "warnings.txt"
    assert _invoke("deploy-assets", "--out", tmp_path).exit_code == 0  # images by tag: warned about
    assert "serving.cpu_image" in warnings.read_text()
    assert _invoke("deploy-assets", "--out", tmp_path, *by_digest).exit_code == 0
    assert not warnings.exists()  # tfxp's own, from the run before: nothing to warn about now

    warnings.write_text("my review notes\n")
    assert _invoke("deploy-assets", "--out", tmp_path, *by_digest).exit_code == 0
    assert warnings.read_text() == "my review notes\n"  # not tfxp's: left


def test_deploy_assets_never_replaces_files_it_did_not_write(tmp_path: Path) -> None:
    # adv3 B10: the user's own models.config and kubernetes/deployment.yaml were replaced silently, exit 0
    out = tmp_path / "deploy"
    (out / "kubernetes").mkdir(parents=True)
    (out / "models.config").write_text("my notes\n")
    (out / "kubernetes" / "deployment.yaml").write_text("mine\n")

    result = _invoke("deploy-assets", "--out", out)

    _refused(
        result,
        f"--out {out} holds files tfxp did not write",
        "models.config, kubernetes/deployment.yaml",
        "give --out another folder, or move those files away",
    )
    assert (out / "models.config").read_text() == "my notes\n"
    assert sorted(path.name for path in out.rglob("*")) == ["deployment.yaml", "kubernetes", "models.config"]

    # tfxp's own earlier output is replaced; what it no longer writes (warnings.txt: images by digest) goes.
    own = tmp_path / "own"
    assert _invoke("deploy-assets", "--out", own).exit_code == 0
    digest = "@sha256:" + "a" * 64
    by_digest = ("--set", f"serving.cpu_image=tensorflow/serving{digest}", "--set", f"serving.gpu_image=tf/gpu{digest}")
    assert _invoke("deploy-assets", "--out", own, *by_digest).exit_code == 0
    assert digest in (own / "kubernetes" / "deployment.yaml").read_text() and not (own / "warnings.txt").exists()


def _data(folder: Path) -> Path:
    (folder / "train").mkdir(parents=True)
    (folder / "eval").mkdir()
    (folder / "labels.txt").write_text("zero\none\n")
    return folder


def test_run_never_writes_its_outputs_into_the_data(tmp_path: Path) -> None:
    # adv3 B11: `--output <data.path>/train` was accepted, and the next run read report.html as TFRecords
    data = _data(tmp_path / "digits")
    (tmp_path / "link").symlink_to(data)

    for output in (data / "train", data, tmp_path / "link" / "eval"):
        result = _invoke("run", "--set", f"data.path={data}", "--output", output)
        _refused(result, "pipeline.output", f"lies in data.path {data}", "give pipeline.output a folder outside")
    assert sorted(path.name for path in data.rglob("*")) == ["eval", "labels.txt", "train"]  # nothing written
    # The data in a folder the run fills: the serving base, here.
    served = _data(tmp_path / "out" / "serving" / "digits" / "1")
    result = _invoke("run", "--set", f"data.path={served}", "--output", tmp_path / "out")
    _refused(result, f"data.path {served} lies in the serving base {tmp_path / 'out' / 'serving' / 'digits'}")


def test_compile_never_puts_the_spec_or_the_pipeline_root_in_the_data(tmp_path: Path) -> None:
    data = _data(tmp_path / "digits")
    given = ("--set", f"data.path={data}", *DATA_SETS)
    _refused(_invoke("compile", *given, "--out", data / "pipeline.yaml"), f"--out {data / 'pipeline.yaml'} lies in")
    root = ("--set", "kubeflow.pipeline_root=gs://b/data/root")
    result = _invoke("compile", "--set", "data.path=gs://b/x/../data", *DATA_SETS, *root, "--out", tmp_path / "p.yaml")
    _refused(result, "kubeflow.pipeline_root gs://b/data/root lies in data.path gs://b/x/../data")
    assert not (tmp_path / "p.yaml").exists()


def test_compile_never_writes_a_file_beside_the_spec_over_its_config(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.tfjob.yaml"  # where `--out pipeline.yaml` puts the workers' TFJob
    config.write_text((REPO / "configs" / "imagenet_a100.yaml").read_text())
    before = _digest(config)

    workers = ("--set", "trainer.workers=4", "--set", "trainer.strategy=auto")
    result = _invoke("compile", "--config", config, *workers, "--out", tmp_path / "pipeline.yaml")

    _refused(result, f"--out {config} is the file --config {config} that this command reads")
    assert _digest(config) == before
    assert not (tmp_path / "pipeline.yaml").exists()  # refused before the spec was written


def test_deploy_assets_shows_a_folder_with_brackets_as_it_is(tmp_path: Path) -> None:
    # `[a]` in a path was read as Rich markup and vanished from "wrote ..." and the warnings line.
    out = tmp_path / "[a] b"
    result = _invoke("deploy-assets", "--out", out)
    assert result.exit_code == 0, result.output
    text = "".join(result.output.split())
    assert f"wrote{out}/models.config".replace(" ", "") in text
    assert f"(thewarningsarealsoin{out}/warnings.txt)".replace(" ", "") in text
