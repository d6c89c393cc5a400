"""What tfxp sets on the TFX pipeline's components before KFP's V2 compiler sees them: the run parameters, the
run record's folder, the exit handler, the Trainer's TFJob, and no user code staged by file.

What changes from run to run is a pipeline parameter (`RUN_PARAMETERS`, defaults from the config), so a run or a
schedule sets it without recompiling; `create_pipeline` itself stays free of them (LocalDagRunner runs it as is).
The Trainer's run_fn is referenced by dotted path and lives in the image, so compiling builds and stages no
user-module wheel; `check_nothing_staged` keeps it that way.

Example:
    components = list(create_pipeline(config).components)
    check_nothing_staged(components)
    defaults = set_run_parameters(components, run_parameters(config))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.multinode.settings import TfJobLaunch
from components.multinode.tfjob import tfjob_template
from components.notify.run_record import RUN_RECORDS_DIR
from foundation.errors import TfxpError
from pipeline.config import TfxpConfig
from pipeline.kubeflow.compiler.workers import WorkersConfigError, worker_template

# Exec properties that make the V2 compiler build and stage a user-module wheel.
_STAGING_PROPERTIES = ("module_file", "module_path")


class KubeflowCompileError(TfxpError, ValueError):
    """The config cannot be compiled for Kubeflow; the message names the key and the fix."""


@dataclass(frozen=True)
class RunParameter:
    """A pipeline parameter: a component's exec property that each run may set, compiled with the config's value
    as its default.

    Attributes:
        name: The parameter's name in the spec (`--param NAME=VALUE`, the KFP UI's run form).
        component: The TFX component id whose exec property it sets.
        exec_property: That exec property.
        key: The config key the default comes from.
    """

    name: str
    component: str
    exec_property: str
    key: str


# What changes from run to run. TFX 1.21 can make only a whole exec property a pipeline parameter: a plain
# value, or a proto as its JSON text (`train_args` is TFX's TrainArgs, `{"num_steps": 300}`). Values inside
# a proto or a dict stay compiled in: `evaluator.min_accuracy` (TFMA's EvalConfig), the Trainer's
# custom_config (the trainer section) and the label map path.
RUN_PARAMETERS = (
    RunParameter("data_path", "ImportExampleGen", "input_base", "data.path"),
    RunParameter("train_args", "Trainer", "train_args", "trainer.train_steps"),
)
# For data in span folders (`data.spans` other than `none`), which spans a run reads: `latest`, `all` or N.
SPANS_PARAMETER = RunParameter("spans", "ImportExampleGen", "spans", "data.spans")


def run_parameters(config: TfxpConfig) -> tuple[RunParameter, ...]:
    """`RUN_PARAMETERS`, plus the span selection when the config reads span folders (compiled patterns differ
    for data without spans, so `none` cannot be switched at run time)."""
    return RUN_PARAMETERS if config.data.spans == "none" else (*RUN_PARAMETERS, SPANS_PARAMETER)


# The RunReport component's id (components.report.component.COMPONENT_ID; not imported here: it loads TFX).
REPORT_ID = "RunReport"
# What KFP fills in for the exit handler (placeholders it resolves in parameter constants).
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
RUN_NAME_PLACEHOLDER = "{{$.pipeline_job_name}}"


def check_nothing_staged(components: Sequence[Any]) -> None:
    """Refuses components that reference user code by file: the V2 compiler would build and stage a wheel.

    Raises:
        KubeflowCompileError: names the component and the property.
    """
    for component in components:
        properties = getattr(component, "exec_properties", {}) or {}
        for key in _STAGING_PROPERTIES:
            if properties.get(key):
                raise KubeflowCompileError(
                    f"component {component.id} sets {key}={properties[key]!r}: compiling would build and stage "
                    "a user-module wheel; reference the code by dotted path (e.g. Trainer(run_fn=...)) and ship "
                    "it in the image"
                )


def set_run_parameters(
    components: Sequence[Any], parameters: Sequence[RunParameter] = RUN_PARAMETERS
) -> dict[str, Any]:
    """Replaces the exec properties named in `parameters` by TFX `RuntimeParameter`s whose defaults are
    the values the factory set; the V2 compiler turns them into pipeline parameters.

    Returns:
        Parameter name → default.

    Raises:
        KubeflowCompileError: a component or exec property in `RUN_PARAMETERS` is not in the pipeline.
    """
    from tfx import v1 as tfx

    by_id = {component.id: component for component in components}
    defaults = {}
    for parameter in parameters:
        properties = by_id[parameter.component].exec_properties if parameter.component in by_id else {}
        value = properties.get(parameter.exec_property)
        if not isinstance(value, str):
            raise KubeflowCompileError(
                f"run parameter {parameter.name}: {parameter.component}.{parameter.exec_property} is not a "
                f"compiled text value ({value!r}); RUN_PARAMETERS no longer matches create_pipeline"
            )
        properties[parameter.exec_property] = tfx.dsl.experimental.RuntimeParameter(
            name=parameter.name, ptype=str, default=value
        )
        defaults[parameter.name] = value
    return defaults


def set_run_record(components: Sequence[Any], serving_base: str) -> None:
    """Gives the RunReport the run's id (KFP fills in `{{$.pipeline_job_uuid}}`) and where the run record goes
    (`<serving base>/runs`), which the exit handler reads (`components.notify.run_record`); and the ExampleValidator
    with drift checks the same folder, for the record of a drift stop."""
    from components.report import spec as report_keys
    from components.validation import strict_example_validator as validator_keys

    record_dir = f"{serving_base.rstrip('/')}/{RUN_RECORDS_DIR}"
    for component in components:
        if component.id == REPORT_ID:
            component.exec_properties[report_keys.RUN_ID_KEY] = RUN_ID_PLACEHOLDER
            component.exec_properties[report_keys.RUN_RECORD_DIR_KEY] = record_dir
        elif component.id == validator_keys.COMPONENT_ID and component.exec_properties.get(validator_keys.DRIFT_KEY):
            # A drift stop files the record itself (a constant: the task's KFP cache key does not change per run).
            component.exec_properties[validator_keys.RUN_RECORD_DIR_KEY] = record_dir


def run_notice(config: TfxpConfig, pipeline_root: str, serving_base: str) -> Any | None:
    """The exit handler that posts each run's outcome to `kubeflow.notify_url`; None when it is empty.
    `pipeline_root` is the compiled root (`compile.pipeline_root`), `serving_base` the layout's."""
    if not config.kubeflow.notify_url:
        return None
    from tfx.orchestration.kubeflow.decorators import FinalStatusStr

    from components.notify.component import RunNotice

    return RunNotice(
        final_status=FinalStatusStr(),
        notify_url=config.kubeflow.notify_url,
        pipeline_name=config.pipeline.name,
        pipeline_root=pipeline_root,
        serving_base=serving_base,
        run_id=RUN_ID_PLACEHOLDER,
        run_name=RUN_NAME_PLACEHOLDER,
    )


def trainer_tfjob(config: TfxpConfig) -> TfJobLaunch | None:
    """With `trainer.workers` > 1, the TFJob the Trainer task runs its workers as (it travels in the Trainer's
    custom_config); None with one worker.

    Raises:
        KubeflowCompileError: a malformed worker setting (names the key).
    """
    if config.trainer.workers == 1:
        return None
    try:
        manifest = tfjob_template(worker_template(config))
    except WorkersConfigError as error:
        raise KubeflowCompileError(str(error)) from None
    return TfJobLaunch(
        manifest=manifest,
        deadline_seconds=config.kubeflow.workers.job_deadline_seconds,
        schedule_timeout_seconds=config.kubeflow.workers.schedule_timeout_seconds,
        shared_dir=config.kubeflow.workers.shared_dir,
    )


def trainer_id(components: Sequence[Any]) -> str:
    """The id of the pipeline's one Trainer.

    Raises:
        KubeflowCompileError: the pipeline has no Trainer, or more than one.
    """
    from tfx.components import Trainer

    ids = [component.id for component in components if isinstance(component, Trainer)]
    if len(ids) != 1:
        raise KubeflowCompileError(f"the pipeline has {len(ids)} Trainer components; tfxp expects exactly one")
    return ids[0]
