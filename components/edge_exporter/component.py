"""EdgeExporter: a custom TFX component (ComponentSpec + executor class) after the Evaluator.

Example:
    edge_exporter = EdgeExporter(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_blessing=evaluator.outputs["blessing"],
        push_base="tfxp_output/edge/digits",
        mode="int8",
    )
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel
from components.edge_exporter.executor import Executor
from components.edge_exporter.spec import EdgeExporterSpec
from edge.errors import EdgeError
from edge.quantize import IO_DTYPES, SUPPORTED_OPS, get_mode


class EdgeExporter(base_component.BaseComponent):
    """Converts the trained model to TFLite, checks its accuracy against the SavedModel and pushes it when the
    drop is within `max_accuracy_drop` (and the Evaluator blessed the model, when `model_blessing` is given).

    Args:
        model: Channel of the Trainer's Model (its `Format-Serving/` SavedModel is converted).
        examples: Channel of Examples with `train` (int8 calibration) and `eval` (both accuracies) splits.
        push_base: `<edge base>/<model>`, e.g. `OUT/edge/digits`; versions go to `<push_base>/<version>/`.
        model_blessing: The Evaluator's blessing; when it is not blessed the component records a skip.
        mode: `none`, `dynamic`, `float16` or `int8`. Defaults to `int8`.
        io_dtype: I/O type of an int8 model: `int8`, `uint8` or `float32`. Defaults to `int8`.
        representative_samples: Train examples for int8 calibration. Defaults to 200.
        supported_ops: `builtins` or `builtins+select_tf`. Defaults to `builtins`.
        max_accuracy_drop: Largest SavedModel − TFLite accuracy for a blessing. Defaults to 0.01.
        threads: LiteRT threads for evaluation and latency. Defaults to 2.
        eval_samples: Eval examples evaluated; 0 = all. Defaults to 0.
        label_offset: Subtracted from `image/class/label`. Defaults to 0.
        benchmark_runs: Timed batch-1 invocations. Defaults to 50.
        keep_tensor_names: Keep the tensor debug names in `model.tflite`. Defaults to False (stripped).

    Raises:
        EdgeError: an unknown mode, ops setting or I/O type (checked here, before the pipeline runs).
    """

    SPEC_CLASS = EdgeExporterSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        examples: types.BaseChannel,
        push_base: str,
        model_blessing: types.BaseChannel | None = None,
        mode: str = "int8",
        io_dtype: str = "int8",
        representative_samples: int = 200,
        supported_ops: str = "builtins",
        max_accuracy_drop: float = 0.01,
        threads: int = 2,
        eval_samples: int = 0,
        label_offset: int = 0,
        benchmark_runs: int = 50,
        keep_tensor_names: bool = False,
    ) -> None:
        get_mode(mode)
        if supported_ops not in SUPPORTED_OPS:
            raise EdgeError(f"EdgeExporter: supported_ops {supported_ops!r} is not one of {list(SUPPORTED_OPS)}")
        if io_dtype not in IO_DTYPES:
            raise EdgeError(f"EdgeExporter: io_dtype {io_dtype!r} is not one of {list(IO_DTYPES)}")
        spec = EdgeExporterSpec(
            model=model,
            examples=examples,
            model_blessing=model_blessing,
            push_base=push_base,
            mode=mode,
            io_dtype=io_dtype,
            representative_samples=representative_samples,
            supported_ops=supported_ops,
            max_accuracy_drop=float(max_accuracy_drop),
            threads=threads,
            eval_samples=eval_samples,
            label_offset=label_offset,
            benchmark_runs=benchmark_runs,
            keep_tensor_names=int(keep_tensor_names),
            edge_model=types.Channel(type=EdgeModel),
            edge_blessing=types.Channel(type=EdgeBlessing),
        )
        super().__init__(spec=spec)
