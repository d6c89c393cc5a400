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
    local_run: `tfxp run-spec`: a compiled spec's DAG walked and run here, task by task.
    local_task: One container task of a compiled spec as a local subprocess (ExecutorInput, placeholders, outputs).

Nothing is imported here, so `import pipeline.kubeflow.<module>` pulls in only what that module needs.
"""
