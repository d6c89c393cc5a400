"""KFP's cache made to see what changes outside the pipeline: the data's files and the served versions.

Open-source KFP keys its cache on a task's input artifacts' MLMD ids, input parameter values, output types,
image and command (kubeflow/pipelines `backend/src/v2/cacheutils/cache.go:173-229`, `driver/cache.go:87-130`,
at commit 7b70c7b); a cache hit hands the cached execution's artifacts (same ids) downstream, so the tasks
after it are hits too. TFX's own answer, the ExampleGen `preCacheCheck` lifecycle hook, is never run by the
open-source backend. `wire_input_fingerprint` adds one uncached task, `InputFingerprint`
(`components.kfp.fingerprint_task`), and feeds its outputs to the tasks whose results depend on outside
state, as input parameters, which KFP's key includes:

- ImportExampleGen gets `tfxp_cache_data` (the selected spans' files; removed by the entrypoint before TFX);
- ServedBaseline gets its `served_fingerprint` execution property (what its local driver sets);
- the Trainer gets `tfxp_cache_labels` (the label map's content, what its local driver sets; removed by the
  entrypoint): a class renamed in the label map retrains, and the model that holds the new names is pushed.

Both are then cached: a night with nothing new is a cache hit from ImportExampleGen to the Evaluator and the
Pusher; a new span reruns everything; a rolled-back served version reruns the baseline, the Evaluator and the
Pusher. The RunReport runs on every run (it takes the run id), and writes the record the exit handler reads.

Example:
    wire_input_fingerprint(doc, image="registry/tfxp:0.1.0")
"""

from __future__ import annotations

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp import fingerprint_task
from pipeline.kubeflow.compiler.spec import PipelineDoc, SpecPatchError, dags, pipeline_tasks

EXAMPLE_GEN_TASK = "ImportExampleGen"
BASELINE_TASK = "ServedBaseline"
TRAINER_TASK = "Trainer"
# ServedBaseline's execution property that its local driver fills in (components.baseline.driver).
SERVED_FINGERPRINT_PROPERTY = "served_fingerprint"
_STRING = pipeline_spec_pb2.ParameterType.STRING
_COMMAND = ["python", "-m", fingerprint_task.__name__]
# Which input of ImportExampleGen / ServedBaseline each fingerprint input is taken from.
_SOURCES = {
    fingerprint_task.INPUT_BASE: (EXAMPLE_GEN_TASK, "input_base"),
    fingerprint_task.INPUT_CONFIG: (EXAMPLE_GEN_TASK, "input_config"),
    fingerprint_task.SPANS: (EXAMPLE_GEN_TASK, "spans"),
    fingerprint_task.SERVING_BASE: (BASELINE_TASK, "base_path"),
    fingerprint_task.TRAINER_CONFIG: (TRAINER_TASK, "custom_config"),
}


def _dag_of(spec: pipeline_spec_pb2.PipelineSpec, task: str) -> pipeline_spec_pb2.DagSpec:
    for dag in dags(spec):
        if task in dag.tasks:
            return dag
    raise SpecPatchError(f"the compiled pipeline has no {task} task; tfxp's pipeline always has one")


def _feed(
    spec: pipeline_spec_pb2.PipelineSpec,
    task: pipeline_spec_pb2.PipelineTaskSpec,
    parameter: str,
    output: str,
) -> None:
    task.inputs.parameters[parameter].Clear()
    task.inputs.parameters[parameter].task_output_parameter.producer_task = fingerprint_task.TASK
    task.inputs.parameters[parameter].task_output_parameter.output_parameter_key = output
    spec.components[task.component_ref.name].input_definitions.parameters[parameter].parameter_type = _STRING
    if fingerprint_task.TASK not in task.dependent_tasks:
        task.dependent_tasks.append(fingerprint_task.TASK)


def wire_input_fingerprint(doc: PipelineDoc, image: str) -> None:
    """Adds the `InputFingerprint` task next to ImportExampleGen and feeds its outputs to ImportExampleGen,
    ServedBaseline and the Trainer (see the module docstring). Caching flags, resources and retries are
    `patch_pipeline_doc`'s.

    Raises:
        SpecPatchError: the spec has no ImportExampleGen.
    """
    spec = doc.pipeline_spec
    dag = _dag_of(spec, EXAMPLE_GEN_TASK)
    with_baseline = BASELINE_TASK in dag.tasks  # none with `evaluator.baseline: none`
    name = fingerprint_task.TASK
    label = f"{name}_executor"
    component = spec.components[name]
    component.executor_label = label
    task = dag.tasks[name]
    task.task_info.name = name
    task.component_ref.name = name
    for key, (source_task, source_input) in _SOURCES.items():
        component.input_definitions.parameters[key].parameter_type = _STRING
        if source_task in dag.tasks:
            task.inputs.parameters[key].CopyFrom(dag.tasks[source_task].inputs.parameters[source_input])
        else:
            task.inputs.parameters[key].runtime_value.constant.string_value = ""
    for output in (fingerprint_task.DATA_OUTPUT, fingerprint_task.SERVED_OUTPUT, fingerprint_task.LABELS_OUTPUT):
        component.output_definitions.parameters[output].parameter_type = _STRING
    _feed(spec, dag.tasks[EXAMPLE_GEN_TASK], fingerprint_task.DATA_OUTPUT, fingerprint_task.DATA_OUTPUT)
    if with_baseline:
        _feed(spec, dag.tasks[BASELINE_TASK], SERVED_FINGERPRINT_PROPERTY, fingerprint_task.SERVED_OUTPUT)
    if TRAINER_TASK in dag.tasks:
        _feed(spec, dag.tasks[TRAINER_TASK], fingerprint_task.LABELS_OUTPUT, fingerprint_task.LABELS_OUTPUT)
    deployment = json_format.ParseDict(
        json_format.MessageToDict(spec.deployment_spec), pipeline_spec_pb2.PipelineDeploymentConfig()
    )
    container = deployment.executors[label].container
    container.image = image
    container.command[:] = _COMMAND
    container.args[:] = ["--executor_input", "{{$}}"]
    spec.deployment_spec.Clear()
    spec.deployment_spec.update(json_format.MessageToDict(deployment))


def check_input_fingerprint(doc: PipelineDoc) -> None:
    """Refuses a spec in which a cached ImportExampleGen or ServedBaseline is not keyed by `InputFingerprint`:
    KFP would serve it from the cache forever (a new span never read, a rolled-back model never seen).

    Raises:
        SpecPatchError: names the task and the fix.
    """
    spec = doc.pipeline_spec
    for name, parameter in ((EXAMPLE_GEN_TASK, fingerprint_task.DATA_OUTPUT),
                            (BASELINE_TASK, SERVED_FINGERPRINT_PROPERTY)):  # fmt: skip
        if name not in pipeline_tasks(spec):
            continue  # no ServedBaseline with `evaluator.baseline: none`
        task = _dag_of(spec, name).tasks[name]
        source = (
            task.inputs.parameters[parameter].task_output_parameter if parameter in task.inputs.parameters else None
        )
        if task.caching_options.enable_cache and (source is None or source.producer_task != fingerprint_task.TASK):
            raise SpecPatchError(
                f"{name} is cached by KFP but not keyed by the {fingerprint_task.TASK} task: KFP would serve it "
                "from its cache on every run (a new span never read, a new served model never seen); compile "
                "with `tfxp compile`, or list it in kubeflow.uncached_components"
            )
