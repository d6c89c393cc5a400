# syntax=docker/dockerfile:1
# The tfxp component image. Every Kubeflow task runs in it as
#   python -m tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor --executor_class_path ...
# (KFP sets that command), so the Trainer's run_fn and the custom executors are imported from the installed
# project: compiling stages no code.
#
#   docker build -t registry.example.com/ml/tfxp:0.1.0 .
#   docker build --target dataflow-worker -t registry.example.com/ml/tfxp-dataflow-worker:0.1.0 .
#
# Versions: TensorFlow, Beam and every other package come from constraints.txt (tests/project/test_kubeflow_docker.py
# checks that the pins below equal it). The base has glibc >= 2.39 (Debian 13), so ml-metadata and TFDV
# install from their manylinux_2_39 wheels without the glibc compat step scripts/ applies on older hosts.
# The base images are named here, not through ARGs, so scanners (checkov, hadolint) see the pinned tags; the
# image has no HEALTHCHECK: its tasks run to completion (serving/checkov.yaml says why that check is skipped).

FROM apache/beam_python3.11_sdk:2.77.0 AS beam-sdk

FROM python:3.11-slim-trixie AS tfxp
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=2
WORKDIR /opt/tfxp
COPY pyproject.toml constraints.txt ./
COPY pipeline ./pipeline
COPY foundation ./foundation
COPY components ./components
COPY serving ./serving
COPY edge ./edge
# tensorflow[and-cuda] adds the CUDA/cuDNN wheels for the A100 Trainer; the same TF version as the project.
RUN pip install -c constraints.txt "tensorflow[and-cuda]==2.21.0" . \
    && python -c "import tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor, components.trainer.run_fn, components.pusher.executor, components.edge_exporter.executor"
# MediaPipe's ImageClassifier (the EdgeExporter's client check) and tflite-support (the model metadata writer) need
# absl-py >= 2, which TFX excludes: a venv of their own, pinned by constraints-mediapipe.txt as `make setup` does;
# edge/app_client.py finds it through TFXP_MEDIAPIPE_PYTHON.
# tflite-support's metadata extensions link libusb-1.0.so.0, which the slim base does not have.
COPY constraints-mediapipe.txt ./
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libusb-1.0-0 \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/tfxp/.venv-mediapipe \
    && /opt/tfxp/.venv-mediapipe/bin/pip install -c constraints-mediapipe.txt mediapipe tflite-support \
    && /opt/tfxp/.venv-mediapipe/bin/python -c "import mediapipe.tasks.python.vision; from tflite_support.metadata_writers import image_classifier"
ENV TFXP_MEDIAPIPE_PYTHON=/opt/tfxp/.venv-mediapipe/bin/python
# Non-root, with a numeric UID so Kubernetes' runAsNonRoot can verify it. KFP's launcher writes artifacts
# under /gcs, /minio and /s3, which a non-root user cannot create at run time.
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin tfxp \
    && mkdir -p /gcs /minio /s3 \
    && chown tfxp:tfxp /gcs /minio /s3
USER 10001:10001
ENV HOME=/home/tfxp
WORKDIR /home/tfxp

# Dataflow/Flink workers for the Beam components: the same packages plus Beam's worker boot program.
FROM tfxp AS dataflow-worker
COPY --from=beam-sdk /opt/apache/beam /opt/apache/beam
ENTRYPOINT ["/opt/apache/beam/boot"]

# The default target: KFP overrides the command per task; by hand it runs tfxp (e.g. `docker run IMAGE tfxp doctor`).
FROM tfxp AS component
CMD ["tfxp", "doctor"]
