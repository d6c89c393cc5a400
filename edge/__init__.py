"""Device models: TFLite conversion, quantization, evaluation and benchmarks with LiteRT.

Plain TensorFlow + LiteRT, no TFX (the EdgeExporter component and `tfxp edge` are thin glue over it):

- `edge.options`: the `edge` config section (`EdgeOptions`) and the quantization modes' names.
- `edge.quantize`: `convert(saved_model, mode, representative_data, supported_ops)`, modes as a registry.
- `edge.camera`: the device model's input, RGB camera frames `[1, H, W, 3]`, built around `serving_preprocessed`.
- `edge.data`: labelled images of one split, decoded with the trainer's shared preprocessing.
- `edge.runtime`: a LiteRT interpreter (XNNPACK, configurable threads) behind `TfliteModel`.
- `edge.evaluate`: accuracy and per-class accuracy of a TFLite model and of its SavedModel.
- `edge.benchmark`: latency p50/p99 at batch 1 and model size.
- `edge.inputs`: what a device model is made from (the SavedModel's assets, the calibration sample) and its
  version identity.
- `edge.export`: the device export: convert, evaluate against the SavedModel, benchmark, gate (nothing written).
- `edge.gate`: the verdict: the accuracy drop against the SavedModel and MediaPipe's check against LiteRT.
- `edge.publish`: the EdgeModel directory, its publishing as a version, and reuse of a version from the same inputs.
- `edge.app_client`: TFLite Model Metadata and MediaPipe's ImageClassifier, run in `.venv-mediapipe`
  (`edge.mediapipe_guest` on that side).
- `edge.release`: `release.json` of each published version, and the listing `tfxp edge versions` prints.
- `edge.verify`: the model on an emulated ARM64 core vs the host (cores, cpuinfo, SME refusal, comparison);
  `edge.arch` prepares and runs that runtime (qemu-user, Debian arm64, `edge.arm_guest` on both sides);
  `edge.arch_gate` makes it the EdgeExporter's check (`edge.verify`).

This package import stays light (no TensorFlow) so the CLI can import `edge.errors` for `tfxp --help`.
"""
