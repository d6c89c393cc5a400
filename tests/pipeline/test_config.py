from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml
from import_probe import heavy_modules_loaded
from typer.testing import CliRunner

from pipeline.config import ConfigError, TfxpConfig, build_config, load_config, valid_keys, write_config

REPO = Path(__file__).resolve().parents[2]


def test_default_yaml_matches_built_in_defaults() -> None:
    # `tfxp run` without --config and `make demo` (configs/default.yaml) must train the same thing.
    assert load_config(REPO / "configs" / "default.yaml") == TfxpConfig()


def test_overrides_apply_in_order_with_yaml_typing() -> None:
    config = build_config(
        {"trainer": {"train_steps": 10}},
        ["trainer.train_steps=20", "trainer.augment=[flip, crop]", "kubeflow.trainer_accelerator.type=nvidia.com/gpu",
         "kubeflow.trainer_accelerator.count=8", "data.schema=infer"],
    )  # fmt: skip
    assert config.trainer.train_steps == 20
    assert config.trainer.augment == ("flip", "crop")
    assert config.kubeflow.trainer_accelerator.count == 8
    assert config.data.schema_source == "infer"


def test_unknown_key_names_the_valid_keys() -> None:
    with pytest.raises(ConfigError, match=r"unknown key `trainer.trian_steps`; valid keys here: .*trainer.train_steps"):
        build_config({}, ["trainer.trian_steps=5"])


def test_unknown_section_lists_sections() -> None:
    with pytest.raises(ConfigError, match=r"unknown key `trainr`; valid keys here: beam, data, edge"):
        build_config({"trainr": {"x": 1}})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.train_steps=many", r"`trainer.train_steps` = 'many': Input should be a valid integer"),
        ("trainer.precision=fp8", r"`trainer.precision` = 'fp8'"),
        ("evaluator.min_accuracy=1.5", r"`evaluator.min_accuracy` = 1.5"),
        ("trainer.train_steps", r"expected `section.key=value`"),
        ("kubeflow.trainer_accelerator.count=8", r"trainer_accelerator.type is empty"),
        ("serving.load_check=maybe", r"`serving.load_check` = 'maybe': Input should be a valid boolean"),
    ],
)
def test_a_bad_set_names_the_key_and_what_is_wrong(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config({}, [override])


def test_config_is_frozen() -> None:
    config = TfxpConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.trainer.train_steps = 3  # type: ignore[misc]


def test_written_config_loads_back_identically(tmp_path: Path) -> None:
    config = build_config({}, ["trainer.train_steps=7", "beam.extra_args=[--runner=DirectRunner]"])
    write_config(config, tmp_path / "params.yaml")
    assert load_config(tmp_path / "params.yaml") == config
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["data"]["schema"] == "label_map"


def test_bad_files_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping of sections"):
        load_config(tmp_path / "list.yaml")


def test_contract_keys_exist() -> None:
    # docs/architecture.md: keys that docs, tests and automation rely on.
    contract = {
        "data.path", "data.label_offset", "trainer.model", "trainer.train_steps", "trainer.batch_size",
        "trainer.precision", "trainer.xla", "trainer.strategy", "trainer.image_size", "evaluator.min_accuracy",
        "serving.model_name", "edge.mode", "edge.max_accuracy_drop", "kubeflow.image",
        "kubeflow.trainer_accelerator.type", "kubeflow.trainer_accelerator.count",
    }  # fmt: skip
    assert contract <= set(valid_keys())


def test_on_off_stay_strings_and_numbers_fit_string_keys(tmp_path: Path) -> None:
    # YAML 1.1 would read `on`/`off` as booleans; tfxp reads YAML 1.2 booleans (true/false) only.
    config = build_config({}, ["trainer.xla=off", "kubeflow.cpu_request=4", "data.path=2024"])
    assert config.trainer.xla == "off"
    assert config.kubeflow.cpu_request == "4"
    assert config.data.path == "2024"
    (tmp_path / "c.yaml").write_text("trainer:\n  xla: on\n  cache: false\n")
    from_file = load_config(tmp_path / "c.yaml")
    assert from_file.trainer.xla == "on" and from_file.trainer.cache is False


def test_output_option_is_taken_as_a_path() -> None:
    from pipeline.cli.options import load_cli_config

    config = load_cli_config(None, ["trainer.train_steps=5"], Path("/tmp/runs #1: test"))
    assert config.pipeline.output == "/tmp/runs #1: test"


def test_sections_are_the_packages_own_types() -> None:
    from components.trainer.options import TrainerOptions
    from edge.options import EdgeOptions
    from serving.options import ServingOptions

    config = TfxpConfig()
    assert (type(config.trainer), type(config.edge), type(config.serving)) == (
        TrainerOptions,
        EdgeOptions,
        ServingOptions,
    )
    # The digits defaults users see (the section's, not those of an older copy of it).
    assert (config.trainer.train_steps, config.trainer.schedule.warmup_fraction, config.trainer.image_size) == (
        300,
        0.1,
        16,
    )
    assert (config.trainer.optimizer.name, config.trainer.schedule.learning_rate) == ("sgd", 0.1)


def test_unregistered_model_lists_the_registered_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=r"`trainer.model` = 'resnet5': unknown model; registered: mobilenet_v2, resnet50, resnet50_v1, "
        r"small_resnet$",
    ):
        build_config({}, ["trainer.model=resnet5"])


def test_unregistered_edge_mode_lists_the_registered_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"`edge.mode` = 'int4': unknown quantization mode; registered: dynamic, float16, int8, none$"
    ):
        build_config({"edge": {"mode": "int4"}})


def test_edge_io_dtype_int8_applies_to_int8_only() -> None:
    with pytest.raises(ConfigError, match=r"\n  edge.io_dtype=int8 applies to edge.mode=int8 only \(edge.mode is f"):
        build_config({}, ["edge.mode=float16", "edge.io_dtype=int8"])
    assert build_config({}, ["edge.mode=float16"]).edge.io_dtype == "uint8"


def test_loading_a_config_imports_no_tensorflow() -> None:
    code = (
        "from pipeline.config import load_config; "
        "load_config(__import__('pathlib').Path('configs/imagenet_a100.yaml'), ['trainer.model=resnet50'])"
    )
    assert heavy_modules_loaded(code, ["tensorflow", "tf_keras", "keras", "tfx"]) == []


@pytest.mark.parametrize("command", ["compile", "run"])
def test_unregistered_model_fails_the_cli_within_a_second(command: str, tmp_path: Path) -> None:
    from pipeline.cli import app

    arguments = [command, "--set", "trainer.model=resnet5", "--set", f"pipeline.output={tmp_path / 'out'}"]
    if command == "compile":
        arguments += ["--out", str(tmp_path / "out" / "pipeline.yaml")]
    started = time.perf_counter()
    result = CliRunner().invoke(app, arguments)
    seconds = time.perf_counter() - started

    assert result.exit_code == 2, result.output
    assert (
        "`trainer.model` = 'resnet5': unknown model; registered: mobilenet_v2, resnet50, resnet50_v1, small_resnet"
        in " ".join(result.output.split())
    )
    assert seconds < 1.0
    assert not (tmp_path / "out").exists()


def test_data_spans_label_offset_and_patterns() -> None:
    assert {"data.spans", "data.train_pattern", "data.eval_pattern"} <= set(valid_keys())
    assert build_config({"data": {"spans": 3}}).data.spans == 3
    assert build_config({}, ["data.spans=latest", "data.label_offset=1"]).data.spans == "latest"
    assert build_config({}).data.label_offset == "auto" and build_config({}).data.first_label == 0
    for override, message in [
        ("data.spans=0", r"`data.spans` = 0: expected `none` \(no span folders\), `latest`, `all`, or N ≥ 1"),
        ("data.label_offset=-1", r"`data.label_offset` = -1: expected auto or a number ≥ 0"),
        ("data.train_pattern=train-*", r"data.train_pattern is set but data.eval_pattern is not; set both"),
        ("data.file_pattern=span-{SPAN}/*", r"data.file_pattern = 'span-\{SPAN\}/\*': a glob relative to data.path"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build_config({}, [override])
    with pytest.raises(ConfigError, match=r"data.split is hash \(one set of files split by hash buckets"):
        build_config({}, ["data.split=hash", "data.train_pattern=a/*", "data.eval_pattern=b/*"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.path=  ", "`data.path` = '': is empty"),
        ("trainer.train_steps=true", "`trainer.train_steps` = True: expected a number, got the boolean true"),
        ("evaluator.min_accuracy=false", "`evaluator.min_accuracy` = False: expected a number, got the boolean false"),
        (
            "trainer.schedule.learning_rate=.inf",
            "`trainer.schedule.learning_rate` = inf: Input should be a finite number",
        ),
    ],
)
def test_values_pydantic_would_quietly_accept_are_errors(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [override])


def test_a_config_file_that_is_not_text_names_the_file(tmp_path: Path) -> None:
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01trainer:")
    with pytest.raises(ConfigError, match=f"config file {re.escape(str(binary))} is not UTF-8 text"):
        load_config(binary)


DUPLICATED = (
    "trainer:\n  train_steps: 5\nkubeflow:\n  trainer_accelerator:\n    type: nvidia.com/gpu\n    count: 1\n"
    "    count: 2\n"
)


def test_a_key_written_twice_at_any_depth_names_the_file_the_key_and_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATED)
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(path))}, line 7: the key 'count' is written "
                       r"twice in one mapping \(first at line 6\)"):  # fmt: skip
        load_config(path)
    path.write_text("data:\n  path: a\ntrainer: {}\ndata:\n  path: b\n")
    with pytest.raises(ConfigError, match=r"line 4: the key 'data' is written twice in one mapping \(first at line 1"):
        load_config(path)


def test_a_set_value_with_a_key_written_twice_is_refused_naming_it() -> None:
    # Read as text, it would pass on as "{type: a, count: 1, count: 2}" and fail as "not a valid dictionary".
    with pytest.raises(ConfigError, match=r"^--set kubeflow.trainer_accelerator=\{.*\}, line 1: the key 'count' is "
                       r"written twice in one mapping \(first at line 1\)"):  # fmt: skip
        load_config(None, ["kubeflow.trainer_accelerator={type: nvidia.com/gpu, count: 1, count: 2}"])
    assert load_config(None, ["data.path={not yaml"]).data.path == "{not yaml"  # YAML it is not: the text itself


def test_tfxp_run_refuses_a_config_with_a_key_written_twice_in_one_message(tmp_path: Path) -> None:
    from pipeline.cli import app

    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATED)
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--output", str(tmp_path / "out")])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"config file {path}, line 7: the key 'count' is written twice in one mapping (first at line 6)" in output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
