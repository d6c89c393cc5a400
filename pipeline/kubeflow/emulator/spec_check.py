"""A compiled spec checked as a whole before `tfxp run-spec` runs its first task: structure, dependencies,
cycles and the types of the values the spec itself gives.

`check_runnable` walks every DAG (the root and the nested DAG components, e.g. TFX's `tfx-dag`) and collects every
problem instead of stopping at the first: a task whose component or executor is missing, an executor run-spec
does not run (resolver, importer), a condition or a loop, a dependency or producer that is not a task of the same
DAG, an input naming a parameter its DAG does not declare, a cycle (named by the tasks on it only, not the tasks
that wait behind it), and a default or constant whose value does not fit the declared `parameterType` (KFP's
driver refuses those when the task starts, after the tasks before it ran).

Example:
    problems = spec_problems(doc.pipeline_spec)
    check_runnable(doc.pipeline_spec, "pipeline.yaml")  # raises ValueError listing them
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

_TYPES = pipeline_spec_pb2.ParameterType.ParameterTypeEnum
# The old PrimitiveType numbers (INT, DOUBLE, STRING) → ParameterType names.
_LEGACY = {1: "NUMBER_INTEGER", 2: "NUMBER_DOUBLE", 3: "STRING"}
_SHAPES = {
    "NUMBER_INTEGER": "a whole number",
    "NUMBER_DOUBLE": "a number",
    "STRING": "text",
    "BOOLEAN": "true or false",
    "LIST": "a list",
    "STRUCT": "a mapping",
}


def declared_type(definition: pipeline_spec_pb2.ComponentInputsSpec.ParameterSpec) -> str:
    """The `ParameterType` name of a declared parameter (`NUMBER_INTEGER`, ...); "" when unspecified."""
    if definition.parameter_type:
        return str(_TYPES.Name(definition.parameter_type))
    return _LEGACY.get(int(definition.type), "")


def value_fits(kind: str, value: struct_pb2.Value) -> bool:
    """Whether `value` is of the `ParameterType` `kind` (types run-spec does not know fit anything)."""
    which = value.WhichOneof("kind")
    if kind == "NUMBER_INTEGER":
        return which == "number_value" and float(value.number_value).is_integer()
    expected = {
        "NUMBER_DOUBLE": "number_value",
        "STRING": "string_value",
        "BOOLEAN": "bool_value",
        "LIST": "list_value",
        "STRUCT": "struct_value",
    }.get(kind)
    return expected is None or which == expected


def _shown(value: struct_pb2.Value) -> str:
    text = str(json_format.MessageToJson(value, indent=None))
    return text if len(text) <= 60 else text[:57] + "..."


def _type_problem(where: str, kind: str, value: struct_pb2.Value) -> str | None:
    if value_fits(kind, value):
        return None
    # A text constant may be a placeholder the driver fills in ({{$.pipeline_job_uuid}}).
    if value.WhichOneof("kind") == "string_value" and "{{$" in value.string_value:
        return None
    return f"{where} is {_shown(value)}, but it is declared {kind}, so it must be {_SHAPES.get(kind, kind)}"


def find_cycles(dependencies: Mapping[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per group of tasks that depend on each other (strongly connected components), each as
    task names from its smallest name back to it, each waiting for the next: `[["a", "b", "a"]]`. Tasks that only
    wait behind a cycle are not on it."""
    return [_shortest_cycle(group, dependencies) for group in sorted(_cyclic_groups(dependencies), key=min)]


def _cyclic_groups(dependencies: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected components that hold a cycle (more than one task, or a task waiting for itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str, work: list[tuple[str, Iterator[str]]]) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(dependencies.get(node, ())))))

    def strongconnect(start: str) -> None:
        # Tarjan's algorithm without recursion (a spec may have many tasks).
        work: list[tuple[str, Iterator[str]]] = []
        visit(start, work)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in dependencies:
                    continue
                if child not in index:
                    visit(child, work)
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1 or node in dependencies.get(node, ()):
                    groups.append(group)

    for name in sorted(dependencies):
        if name not in index:
            strongconnect(name)
    return groups


def _shortest_cycle(group: set[str], dependencies: Mapping[str, set[str]]) -> list[str]:
    """The shortest way from the group's smallest name back to itself inside the group (breadth first)."""
    start = min(group)
    parents: dict[str, str] = {}
    queue = deque([start])
    found = None
    while queue and found is None:
        node = queue.popleft()
        for child in sorted(dependencies.get(node, ())):
            if child == start:
                found = node
                break
            if child in group and child not in parents:
                parents[child] = node
                queue.append(child)
    back = []
    node = found or start
    while node != start:
        back.append(node)
        node = parents[node]
    return [start, *reversed(back), start]


def _producers(task: pipeline_spec_pb2.PipelineTaskSpec) -> Iterator[tuple[str, str]]:
    # (input description, producer task) of every input taken from another task.
    for key, parameter in task.inputs.parameters.items():
        kind = parameter.WhichOneof("kind")
        if kind == "task_output_parameter":
            yield f"input parameter {key}", parameter.task_output_parameter.producer_task
        elif kind == "task_final_status":
            yield f"input parameter {key}", parameter.task_final_status.producer_task
    for key, artifact in task.inputs.artifacts.items():
        if artifact.WhichOneof("kind") == "task_output_artifact":
            yield f"input artifact {key}", artifact.task_output_artifact.producer_task


def spec_problems(spec: pipeline_spec_pb2.PipelineSpec) -> list[str]:
    """Every problem that would stop run-spec, or KFP's driver, at some task (see the module docstring)."""
    problems: list[str] = []
    for name, definition in sorted(spec.root.input_definitions.parameters.items()):
        if definition.HasField("default_value"):
            problem = _type_problem(
                f"the default of pipeline parameter {name}", declared_type(definition), definition.default_value
            )
            if problem:
                problems.append(problem)
    walk = _SpecWalk(spec, problems)
    walk.dag(spec.root.dag, "", spec.root.input_definitions.parameters)
    return problems


class _SpecWalk:
    """Walks a spec's DAGs, each DAG component once, and adds what it finds to `problems`."""

    def __init__(self, spec: pipeline_spec_pb2.PipelineSpec, problems: list[str]) -> None:
        self.spec = spec
        self.problems = problems
        self.executors = json_format.ParseDict(
            json_format.MessageToDict(spec.deployment_spec), pipeline_spec_pb2.PipelineDeploymentConfig()
        ).executors
        self.walked: set[str] = set()
        self.inside: list[str] = []  # the DAG components being walked, outermost first

    def dag(self, dag: pipeline_spec_pb2.DagSpec, where: str, inputs: Mapping[str, Any]) -> None:
        """Checks every task of `dag` (`where` names it in the messages; `inputs` are its declared parameters)."""
        tasks = dag.tasks
        for name, task in sorted(tasks.items()):
            self._task(f"task {name}{where}", task, tasks, where or " of the root DAG", inputs)
        dependencies = {name: set(task.dependent_tasks) & set(tasks) for name, task in tasks.items()}
        for cycle in find_cycles(dependencies):
            self.problems.append(
                f"the tasks {' → '.join(cycle)}{where} depend on each other in a cycle (each waits for the next), so "
                "none of them can start; remove one of those dependentTasks"
            )

    def _task(
        self,
        label: str,
        task: pipeline_spec_pb2.PipelineTaskSpec,
        tasks: Mapping[str, pipeline_spec_pb2.PipelineTaskSpec],
        in_dag: str,
        inputs: Mapping[str, Any],
    ) -> None:
        problems = self.problems
        if task.trigger_policy.condition or task.WhichOneof("iterator"):
            problems.append(f"{label} has a condition or a loop, which run-spec does not run")
        for dependency in task.dependent_tasks:
            if dependency not in tasks:
                problems.append(
                    f"{label} depends on {dependency}, which is not a task{in_dag} "
                    f"(its tasks: {', '.join(sorted(tasks))})"
                )
        for what, producer in _producers(task):
            if producer not in tasks:
                problems.append(f"{label}: {what} comes from task {producer}, which is not a task{in_dag}")
        for key, parameter in sorted(task.inputs.parameters.items()):
            if parameter.WhichOneof("kind") == "component_input_parameter":
                source = parameter.component_input_parameter
                if source not in inputs:
                    problems.append(
                        f"{label}: input parameter {key} takes {source}, which its DAG does not declare "
                        f"(declared: {', '.join(sorted(inputs)) or 'none'})"
                    )
        reference = task.component_ref.name
        if reference not in self.spec.components:
            problems.append(f"{label} runs component {reference or '(none)'}, which the spec does not have")
            return
        self._component(label, task, reference)

    def _component(self, label: str, task: pipeline_spec_pb2.PipelineTaskSpec, reference: str) -> None:
        """The task's constants against its component's declared types, then its DAG or its executor."""
        component = self.spec.components[reference]
        declared = component.input_definitions.parameters
        for key, parameter in sorted(task.inputs.parameters.items()):
            if parameter.WhichOneof("kind") == "runtime_value" and key in declared:
                problem = _type_problem(
                    f"{label}: the constant of input {key}",
                    declared_type(declared[key]),
                    parameter.runtime_value.constant,
                )
                if problem:
                    self.problems.append(problem)
        if component.WhichOneof("implementation") == "dag":
            if reference in self.inside:
                self.problems.append(f"{label} runs DAG {reference} inside itself, which would never end")
            elif reference not in self.walked:
                self.walked.add(reference)
                self.inside.append(reference)
                self.dag(component.dag, f" (in DAG {reference})", declared)
                self.inside.pop()
            return
        executor = self.executors.get(component.executor_label)
        kind = executor.WhichOneof("spec") if executor is not None else None
        if kind != "container":
            self.problems.append(
                f"{label} runs a {kind or 'missing'} executor ({component.executor_label or 'no label'}); "
                "run-spec runs container executors only (tfxp compile drops resolver tasks)"
            )


def check_runnable(spec: pipeline_spec_pb2.PipelineSpec, source: str) -> None:
    """Raises when `spec_problems` finds any.

    Raises:
        ValueError: naming `source` and every problem.
    """
    problems = spec_problems(spec)
    if problems:
        listed = "\n  ".join(problems)
        raise ValueError(f"{source} cannot run ({len(problems)} problem{'s' * (len(problems) > 1)}):\n  {listed}")
