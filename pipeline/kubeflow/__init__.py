"""tfxp on Kubeflow Pipelines (KFP v2, open source), in three jobs:

- `compiler/`: `create_pipeline(config)` through TFX's KubeflowV2DagRunner into `pipeline.yaml`, then patched
  (pods, platform config, storage, cache keys, parameters, the workers' TFJob template).
- `client/`: the KFP API: submit and watch runs, pipelines and versions, recurring runs, credentials, preflight.
- `emulator/`: `tfxp run-spec`, a compiled spec run here task by task on a backend emulated from its source.

The client and the emulator read compiled specs through the compiler's modules; neither knows the other
(import-linter). Nothing is imported here, so `import pipeline.kubeflow.<package>.<module>` pulls in only what that
module needs.
"""
