"""tfxp on Kubeflow Pipelines (KFP v2, open source): compile, patch the compiled spec, submit and watch runs.

Modules:
    compile: `create_pipeline(config)` through TFX's KubeflowV2DagRunner into `pipeline.yaml`, then patched.
    spec: The one place that reads, edits and writes a compiled KFP pipeline spec.
    pod: What a pod asks of Kubernetes (resources, node labels, tolerations), parsed from the config.
    submit: `KfpRunClient`, a small client around `kfp.Client` with deadlines and clear errors.
    auth: Credentials from the environment, the host, and the errors that name them.
    runs: A run's status, the errors of submitting and watching it, and the wait loop.

Nothing is imported here, so `import pipeline.kubeflow.<module>` pulls in only what that module needs.
"""
