"""The top layer: the typed config, `create_pipeline(config)` (a pure factory), the local runner, Kubeflow (compile,
the KFP API client, the run-spec emulator), the run report and summary, and the `tfxp` CLI."""
