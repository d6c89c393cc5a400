"""The `edge` config section: how the device model is converted, evaluated and gated.

`EdgeOptions` *is* the `edge` section: `pipeline/config.py` composes it, the EdgeExporter component carries it
as one JSON execution parameter, and `edge.export.export_edge_model` takes it. Settings that are not user
config (the data's label offset, the benchmark's run count, split names) are arguments of those functions.

The names of the quantization modes are declared here, without TensorFlow, so the config checks `edge.mode`
when it loads; `edge.quantize` registers one mode under each name and refuses any other.

Example:
    options = EdgeOptions(mode="int8", io_dtype="uint8")
    EdgeOptions.model_validate_json(options.model_dump_json()) == options  # True
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from foundation.config_section import ConfigSection, registered

MODE_NAMES = ("none", "dynamic", "float16", "int8")
ModeName = Annotated[str, registered("quantization mode", MODE_NAMES)]
IoDtype = Literal["int8", "uint8", "float32"]
SupportedOps = Literal["builtins", "builtins+select_tf"]
VerifyArch = Literal["aarch64"]
AppClient = Literal["mediapipe", "none"]


def _named_core(cpu: str) -> str:
    from edge.cores import check_cpu  # light (numpy); refuses `max` with the SME explanation

    return check_cpu(cpu).name


VerifyCpu = Annotated[str, AfterValidator(_named_core)]


class EdgeOptions(ConfigSection):
    """The `edge` config section.

    Attributes:
        enabled: Run the EdgeExporter in the pipeline.
        mode: `none` (float32), `dynamic`, `float16` or `int8` (full integer).
        io_dtype: The device model's input type, camera frames [1, H, W, 3] RGB: `uint8` (what cameras and
          MediaPipe give), `float32` (pixel values 0..255 as floats) or, with mode int8 only, `int8` (which
          MediaPipe cannot feed). A full-integer model's output has it too. Was int8 and for mode int8 only.
        representative_samples: Train examples used to calibrate int8 quantization.
        supported_ops: `builtins`, or `builtins+select_tf` to allow TF ops (needs the Flex delegate).
        max_accuracy_drop: Largest accuracy loss (absolute) of the TFLite model vs the SavedModel.
        threads: LiteRT interpreter threads for evaluation and benchmarks.
        eval_samples: Eval examples the EdgeExporter evaluates both models on; 0 = the whole eval split.
        keep_tensor_names: Keep the converter's tensor debug names in `model.tflite` (for Netron); by default they
          are stripped, a few KB less per model; signatures and their input/output names stay either way.
        verify: Architectures to check the model on before pushing it: `[aarch64]` runs it on an emulated ARM64
          core (`edge.verify`, `tfxp edge verify`) and compares it with the host, with the same kernels (XNNPACK).
        verify_cpu: The emulated core: cortex-a53, cortex-a72, cortex-a76 or neoverse-n1 (never QEMU's `max`,
          whose SME gave wrong int8 results; see the README).
        min_arch_agreement: Smallest fraction of eval examples whose top-1 class must be the same on the target
          as on the host; the target's accuracy must also stay within `max_accuracy_drop` of the SavedModel.
        app_client: `mediapipe` writes TFLite Model Metadata into the model (labels, normalization, color space,
          name, version, description) and requires MediaPipe's ImageClassifier to give the same top-1 as LiteRT
          on the eval examples (needs `.venv-mediapipe`, made by `make setup`); `none` does neither.
        min_app_agreement: Smallest fraction of eval examples whose top-1 from MediaPipe must be LiteRT's.
        app_frame_size: The camera size (height, width) at which MediaPipe is also given the eval images, besides
          their own size: it resizes them itself, as in an app (`edge.app_frames`). E.g. [480, 640] for a VGA
          camera.
        max_app_accuracy_drop: Largest accuracy loss (absolute) of MediaPipe on frames it resizes itself (at their
          own size and at `app_frame_size`) vs the SavedModel on the same images. Looser than `max_accuracy_drop`:
          resizing changes pixels where conversion does not, and on a small eval split one frame is most of a
          point (docs/edge.md has the measurements).
        verify_required: When the check cannot run (no qemu-user-static/mmdebstrap, offline), the model is not
          pushed; false pushes it with the check recorded as not run. A check that ran and failed always blocks.
    """

    enabled: bool = True
    mode: ModeName = "int8"
    io_dtype: IoDtype = "uint8"
    representative_samples: int = Field(200, ge=1)
    supported_ops: SupportedOps = "builtins"
    max_accuracy_drop: float = Field(0.01, ge=0, le=1)
    threads: int = Field(2, ge=1)
    eval_samples: int = Field(0, ge=0)
    keep_tensor_names: bool = False
    verify: tuple[VerifyArch, ...] = ()
    verify_cpu: VerifyCpu = "cortex-a76"
    min_arch_agreement: float = Field(0.995, ge=0, le=1)
    verify_required: bool = True
    app_client: AppClient = "mediapipe"
    min_app_agreement: float = Field(0.99, ge=0, le=1)
    app_frame_size: tuple[Annotated[int, Field(ge=1, le=8192)], Annotated[int, Field(ge=1, le=8192)]] = (240, 240)
    max_app_accuracy_drop: float = Field(0.02, ge=0, le=1)

    @model_validator(mode="after")
    def _int8_io_needs_int8(self) -> EdgeOptions:
        if self.mode != "int8" and self.io_dtype == "int8":
            raise ValueError(
                f"edge.io_dtype=int8 applies to edge.mode=int8 only (edge.mode is {self.mode}); "
                "set edge.io_dtype to uint8 (the default) or float32"
            )
        if self.io_dtype == "int8" and self.app_client == "mediapipe":
            raise ValueError(
                "edge.io_dtype=int8 makes a model MediaPipe cannot feed (its ImageClassifier takes uint8 or float32 "
                "frames), so edge.app_client=mediapipe would block every push; set edge.io_dtype to uint8 (the "
                "default), or edge.app_client to none"
            )
        return self
