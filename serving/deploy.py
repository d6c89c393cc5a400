"""Deployment assets for TensorFlow Serving, rendered from the `serving` section (`serving.options.ServingOptions`).

`render_deploy_assets(options, local_model_dir)` returns file name → text for:

- `models.config`: the model (name, base path, platform), its version policy and `stable`/`canary` labels,
  built as a `ModelServerConfig` proto and printed as text proto;
- `batching_parameters.txt` (CPU) and `batching_parameters_gpu.txt`, per TF Serving's batching guide (CPU:
  one batch thread per core, short timeout; GPU: large batches, a timeout that bounds tail latency, queue
  bounded to the batch threads for online serving);
- `monitoring.config`: Prometheus metrics at `/monitoring/prometheus/metrics`;
- `run_tf_serving_cpu.sh`, `run_tf_serving_gpu.sh`: `docker run` with the configured images;
- `kubernetes/*.yaml` and `kserve/inferenceservice.yaml`: see `serving.k8s_manifests` (a namespace enforcing
  the "restricted" Pod Security Standard, TF Serving's Deployment, Service, HPA, PodDisruptionBudget,
  NetworkPolicy; a KServe `tensorflow` predictor);
- `warnings.txt`, only when there is something to warn about (`deploy_warnings`), e.g. images by tag; it begins
  with `WARNINGS_HEADER`, by which a later run knows it may remove it.

The container sees the models at `options.container_base_path`: a bucket `serving.base_path` as it is, else
`/models/<model_name>`, where the docker scripts mount `local_model_dir` and Kubernetes the models volume.

Example:
    options = ServingOptions(model_name="digits")
    for name, text in render_deploy_assets(options, local_model_dir="/srv/tfxp/serving/digits").items():
        (out / name).write_text(text)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from foundation.k8s.image import check_image
from foundation.k8s.quantity import cpu_cores
from foundation.path_rules import check_not_input, check_written_by_tfxp, record_written, remove_made_file
from foundation.paths import scheme
from serving.config_error import ServingConfigError
from serving.k8s_manifests import (
    CONFIG_DIR,
    MONITORING_PATH,
    dump_manifest,
    image_warnings,
    kserve_inference_service,
    kubernetes_manifests,
    storage_base_uri,
)
from serving.k8s_rollout import RolloutVersions, kserve_canary, rollout_versions, track_manifests
from serving.k8s_rollout_controllers import argo_manifests, flagger_manifests
from serving.model_config import ModelConfig, VersionPolicy, model_config_file_text
from serving.options import ServingOptions
from serving.rollout.layout import TRACKS, track_config_path

WARNINGS_FILE = "warnings.txt"
WARNINGS_HEADER = "# tfxp deploy-assets: what a reviewer of these assets should know (removed when there is nothing)\n"
DEFAULT_MODEL_CONFIG = f"{CONFIG_DIR}/models.config"


def _checked(options: ServingOptions) -> ServingOptions:
    labels = options.labels
    if options.version_policy == "specific" and not options.versions and options.rollout != "canary":
        if not labels:
            raise ServingConfigError(
                "serving.version_policy=specific needs serving.versions (e.g. `--set serving.versions=[3,4]`) "
                "or version labels (serving.stable_version / serving.canary_version)"
            )
        options = options.model_copy(update={"versions": tuple(sorted(set(labels.values())))})
    if labels and options.version_policy == "latest":
        raise ServingConfigError(
            f"version labels {labels} need the labelled versions loaded, which the `latest` policy does not "
            "promise; set `--set serving.version_policy=specific` (serving the labelled versions) or `all`"
        )
    missing = sorted(set(labels.values()) - set(options.versions)) if options.version_policy == "specific" else []
    if missing:
        raise ServingConfigError(
            f"serving.versions {list(options.versions)} does not include the labelled version(s) {missing}; TF Serving "
            "can only label a loaded version"
        )
    for key in ("cpu_image", "gpu_image"):  # options built without validation (model_copy) reach here too
        check_image(getattr(options, key), key=f"serving.{key}")
    if options.allowed_batch_sizes and options.allowed_batch_sizes[-1] != options.max_batch_size:
        raise ServingConfigError(
            f"serving.allowed_batch_sizes {list(options.allowed_batch_sizes)} must end with serving.max_batch_size "
            f"({options.max_batch_size}), as TF Serving requires"
        )
    return options


def models_config(options: ServingOptions) -> str:
    """TF Serving's `--model_config_file`, a ModelServerConfig text proto."""
    policy = VersionPolicy(options.version_policy, options.num_versions, options.versions)
    model = ModelConfig(options.model_name, Path(options.container_base_path), policy, options.labels)
    return model_config_file_text(model, base_path=options.container_base_path)


def _batching_text(max_batch: int, timeout: int, threads: int, enqueued: int, allowed: tuple[int, ...]) -> str:
    # BatchingParameters (session_bundle_config.proto) wraps each knob in a google.protobuf wrapper message.
    lines = [
        f"max_batch_size {{ value: {max_batch} }}",
        f"batch_timeout_micros {{ value: {timeout} }}",
        f"num_batch_threads {{ value: {threads} }}",
        f"max_enqueued_batches {{ value: {enqueued} }}",
    ]
    lines += [f"allowed_batch_sizes: {size}" for size in allowed]
    return "\n".join(lines) + "\n"


def _cpu_count(cpu: str) -> int:
    return max(1, int(cpu_cores(cpu, key="serving.cpu")))


def batching_parameters(options: ServingOptions, gpu: bool = False) -> str:
    """`--batching_parameters_file` for CPU (the config's knobs) or GPU (per the batching guide)."""
    if not gpu:
        return _batching_text(
            options.max_batch_size,
            options.batch_timeout_micros,
            options.num_batch_threads,
            options.max_enqueued_batches,
            options.allowed_batch_sizes,
        )
    threads = _cpu_count(options.cpu)
    # The guide, for online serving on GPUs: threads = CPU cores, batches in the hundreds, a timeout that
    # bounds tail latency, and a queue no deeper than the batch threads (overload goes to other replicas).
    return _batching_text(options.gpu_max_batch_size, options.gpu_batch_timeout_micros, threads, threads, ())


def monitoring_config() -> str:
    """`--monitoring_config_file`: Prometheus metrics on the REST port."""
    return f'prometheus_config {{\n  enable: true\n  path: "{MONITORING_PATH}"\n}}\n'


def server_args(options: ServingOptions, model_config_file: str = DEFAULT_MODEL_CONFIG) -> list[str]:
    """`tensorflow_model_server` flags shared by the docker scripts and the Kubernetes Deployment, reading
    `model_config_file` (a rollout track reads its own, `serving.rollout.layout.track_config_path`)."""
    args = [
        f"--port={options.grpc_port}",
        f"--rest_api_port={options.rest_port}",
        f"--model_config_file={model_config_file}",
        f"--model_config_file_poll_wait_seconds={options.config_poll_seconds}",
        f"--file_system_poll_wait_seconds={max(1, round(options.poll_interval_seconds))}",
        f"--monitoring_config_file={CONFIG_DIR}/monitoring.config",
    ]
    if options.intra_op_threads:
        args.append(f"--tensorflow_intra_op_parallelism={options.intra_op_threads}")
    if options.inter_op_threads:
        args.append(f"--tensorflow_inter_op_parallelism={options.inter_op_threads}")
    if options.labels or model_config_file != DEFAULT_MODEL_CONFIG:
        # TF Serving checks labels before its first load finishes; without this flag a labelled config
        # fails at startup ("not currently available for inference").
        args.append("--allow_version_labels_for_unavailable_models=true")
    return args


def _serving_args(options: ServingOptions, gpu: bool, model_config_file: str = DEFAULT_MODEL_CONFIG) -> list[str]:
    args = server_args(options, model_config_file)
    if options.enable_batching:
        batching_file = "batching_parameters_gpu.txt" if gpu else "batching_parameters.txt"
        args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/{batching_file}"]
    return args


def _docker_script(
    options: ServingOptions, gpu: bool, local_model_dir: str, model_config_file: str = DEFAULT_MODEL_CONFIG
) -> str:
    # Every value from the config is validated where the config loads (the image by the OCI reference grammar)
    # and shell-quoted here as well, so no value can run a command or become a flag of `docker run`.
    image = options.gpu_image if gpu else options.cpu_image
    grpc, rest = int(options.grpc_port), int(options.rest_port)
    args = [shlex.quote(arg) for arg in _serving_args(options, gpu, model_config_file)]
    mount = (
        []
        if options.remote_base
        else [
            '-v "${MODEL_DIR:?set MODEL_DIR to the model base directory}":'
            + shlex.quote(f"{options.container_base_path}:ro")
        ]
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# TensorFlow Serving ({'GPU' if gpu else 'CPU'}) for model {options.model_name}; from `tfxp deploy-assets`.",
        "# Ports are published on HOST (default 127.0.0.1); set HOST=0.0.0.0 to accept remote clients.",
        "set -euo pipefail",
        'CONFIG_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        f"MODEL_DIR=${{MODEL_DIR:-{shlex.quote(local_model_dir)}}}" if local_model_dir else "MODEL_DIR=${MODEL_DIR:-}",
        'HOST="${HOST:-127.0.0.1}"',
        "exec docker run --rm --name " + shlex.quote(f"tf-serving-{options.model_name}") + " \\",
        *(["  --gpus all \\"] if gpu else []),
        f'  -p "${{HOST}}:{grpc}:{grpc}" -p "${{HOST}}:{rest}:{rest}" \\',
        f'  -v "${{CONFIG_DIR}}":{shlex.quote(f"{CONFIG_DIR}:ro")} \\',
        *[f"  {volume} \\" for volume in mount],
        # Quoting keeps `$(…)`, `;` and spaces inert; `--` ends docker's flags, so an image can never be one.
        f"  -- {shlex.quote(image)} \\",
        *[f"  {arg} \\" for arg in args[:-1]],
        f"  {args[-1]}",
    ]
    return "\n".join(lines) + "\n"


def render_deploy_assets(
    options: ServingOptions, local_model_dir: str = "", versions: RolloutVersions | None = None
) -> dict[str, str]:
    """Every asset, relative path → text.

    Args:
        options: The `serving` section.
        local_model_dir: Host directory the docker scripts mount as the model base (the local push directory);
            empty = the scripts require MODEL_DIR. Unused when `serving.base_path` is a bucket path.
        versions: Under `serving.rollout: canary`, the rollout state's stable and canary (`tfxp deploy-assets`
            reads them beside the versions); None = `serving.versions`.

    Raises:
        ValueError: labels the version policy would not load, batch sizes TF Serving rejects, or an image that
            is no image reference.
    """
    options = _checked(options)
    if options.rollout == "canary":
        return _with_warnings(options, render_rollout_assets(options, local_model_dir, versions))
    config_files = {
        "models.config": models_config(options),
        "batching_parameters.txt": batching_parameters(options),
        "batching_parameters_gpu.txt": batching_parameters(options, gpu=True),
        "monitoring.config": monitoring_config(),
    }
    assets = {
        **config_files,
        "run_tf_serving_cpu.sh": _docker_script(options, gpu=False, local_model_dir=local_model_dir),
        "run_tf_serving_gpu.sh": _docker_script(options, gpu=True, local_model_dir=local_model_dir),
        "kserve/inferenceservice.yaml": kserve_inference_service(options),
        **kubernetes_manifests(options, config_files, _serving_args(options, gpu=bool(options.gpus))),
    }
    return _with_warnings(options, assets)


def _with_warnings(options: ServingOptions, assets: dict[str, str]) -> dict[str, str]:
    warnings = deploy_warnings(options)
    if warnings:
        assets[WARNINGS_FILE] = WARNINGS_HEADER + "".join(f"warning: {warning}\n" for warning in warnings)
    return assets


def render_rollout_assets(
    options: ServingOptions, local_model_dir: str = "", versions: RolloutVersions | None = None
) -> dict[str, str]:
    """The assets of `serving.rollout: canary` (`docs/serving.md`, "Guarded rollout on a cluster").

    With `serving.canary.controller: none`, a stable and a canary TF Serving, each reading its track's models.config
    from the model base (`serving.k8s_rollout.track_manifests`; the docker scripts run the stable one), and, when
    the versions are known, the KServe canary. With `argo` or `flagger`, the controller's objects for the newest of
    the versions (`serving.k8s_rollout_controllers`).

    Args:
        options: The `serving` section, checked.
        local_model_dir: As `render_deploy_assets`.
        versions: The stable and canary versions (the rollout state's); None = `serving.versions`'.

    Raises:
        ServingConfigError: a controller with no version to roll out, or more than two versions.
    """
    try:
        versions = versions or rollout_versions(options)
    except ValueError as error:
        raise ServingConfigError(str(error)) from None
    gpu = bool(options.gpus)
    tuning = {
        "batching_parameters.txt": batching_parameters(options),
        "batching_parameters_gpu.txt": batching_parameters(options, gpu=True),
        "monitoring.config": monitoring_config(),
    }
    controller = options.canary.controller
    if controller == "none":
        track_file = {track: track_config_path(options.container_base_path, track) for track in TRACKS}
        assets = {
            **tuning,
            "run_tf_serving_cpu.sh": _docker_script(options, False, local_model_dir, track_file["stable"]),
            "run_tf_serving_gpu.sh": _docker_script(options, True, local_model_dir, track_file["stable"]),
            **track_manifests(options, tuning, {t: _serving_args(options, gpu, track_file[t]) for t in TRACKS}),
        }
        isvc = kserve_canary(options, versions) if versions else None
        if isvc is not None:
            assets["kserve/inferenceservice.yaml"] = dump_manifest(isvc)
        return assets
    if versions is None:
        raise ServingConfigError(
            f"serving.canary.controller={controller} renders the pod template of one model version: name it with "
            "`--set serving.versions=[N]` (or [stable, canary]; the newest is rolled out)"
        )
    revision = options.model_copy(update={"versions": (versions.newest,)})
    config_files = {"models.config": models_config(revision), **tuning}
    render = argo_manifests if controller == "argo" else flagger_manifests
    return {
        **config_files,
        "run_tf_serving_cpu.sh": _docker_script(revision, gpu=False, local_model_dir=local_model_dir),
        "run_tf_serving_gpu.sh": _docker_script(revision, gpu=True, local_model_dir=local_model_dir),
        **render(options, config_files, _serving_args(options, gpu), versions.newest),
    }


def deploy_warnings(options: ServingOptions) -> list[str]:
    """What a reviewer of the assets should know that is not an error: images by tag rather than digest, and a
    canary rollout rendered without its KServe InferenceService (and why)."""
    return image_warnings(options) + _kserve_rollout_warnings(options)


def _kserve_rollout_warnings(options: ServingOptions) -> list[str]:
    if options.rollout != "canary" or options.canary.controller != "none":
        return []
    if scheme(storage_base_uri(options)) == "pvc":
        return [
            "no kserve/inferenceservice.yaml for the canary rollout: KServe mounts a PersistentVolumeClaim entry of "
            "storageUris whole, so it cannot lay one version out as TF Serving's <n>/; serve the models from a bucket "
            "(serving.base_path or serving.storage_uri) for KServe"
        ]
    if not options.versions:
        return [
            "no kserve/inferenceservice.yaml for the canary rollout: name its versions with "
            "`--set serving.versions=[stable]` or `[stable,canary]` (KServe's canary is a new revision per version)"
        ]
    return []


def write_deploy_assets(
    options: ServingOptions,
    out_dir: Path,
    local_model_dir: str = "",
    versions: RolloutVersions | None = None,
    inputs: Mapping[str, Path | None] | None = None,
) -> list[Path]:
    """Renders the assets into `out_dir` (scripts made executable) and returns the written paths; `versions` as in
    `render_deploy_assets`.

    Nothing tfxp did not write is replaced or removed (`foundation.path_rules.check_written_by_tfxp`): the written
    files are listed in `out_dir`'s `.tfxp-written.json`, and a re-run replaces them and removes those it no longer
    writes. A `warnings.txt` an earlier run wrote is removed when there is nothing to warn about; one tfxp did not
    write (no `WARNINGS_HEADER`) is left.

    Args:
        inputs: What the command reads, by the option that names it (`{"--config": path}`): no asset is written
            over one of them.

    Raises:
        PathRuleError: an asset would overwrite one of `inputs`, or a file in `out_dir` that tfxp did not write
            (refused before anything is written).
    """
    assets = render_deploy_assets(options, local_model_dir, versions)
    paths = [out_dir / relative for relative in assets]
    for path in paths:
        check_not_input(path, inputs or {}, "--out")
    check_written_by_tfxp(out_dir, assets, "--out")
    if WARNINGS_FILE not in assets:
        remove_made_file(out_dir / WARNINGS_FILE, WARNINGS_HEADER)
    for path, text in zip(paths, assets.values(), strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix == ".sh":
            path.chmod(0o755)
    record_written(out_dir, assets)
    return paths
