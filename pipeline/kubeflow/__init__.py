"""tfxp on Kubeflow Pipelines (KFP v2, open source): compile, patch the compiled spec, submit and watch runs,
operate pipelines (versions, recurring runs, run management), and run a compiled spec locally.

Modules:
    compile: `create_pipeline(config)` through TFX's KubeflowV2DagRunner into `pipeline.yaml`, then patched.
    spec: The one place that reads, edits and writes a compiled KFP pipeline spec.
    pod: What a pod asks of Kubernetes (resources, node labels, tolerations), parsed from the config.
    submit: `KfpRunClient`, a small client around `kfp.Client` with deadlines and clear errors: submit, list,
        describe, terminate and retry runs.
    pipelines: Upload a compiled spec as a pipeline version (named by content by default); list pipelines, versions.
    schedules: Recurring runs: create (from a file or an uploaded version), list, pause, resume, delete.
    cron: A recurring run's trigger checked before sending: KFP's six-field cron, intervals, the time window.
    params: Run parameters declared in a spec, and `--param k=v` checked and typed against them.
    auth: Credentials from the environment, the host, and the errors that name them.
    runs: A run's status and summary, the errors of submitting and watching it, and the wait loop.
    cache_keys: The `InputFingerprint` task wired in, so that KFP's cache sees new data and the served model.
    storage: What pods and Beam workers can open, PVC mounts, the volume for the launcher's artifact copies.
    preflight: What `submit` and `schedule create` check first: the run's pipeline root, the server's version.
    backend: What a KFP backend (open source, Vertex AI) does around a task, emulated from its source.
    local_run: `tfxp run-spec`: a compiled spec's DAG walked and run here, task by task, on an emulated backend.
    local_task: One container task's inputs as the driver resolves them, placeholders, the command as a subprocess.

Nothing is imported here, so `import pipeline.kubeflow.<module>` pulls in only what that module needs.
"""
