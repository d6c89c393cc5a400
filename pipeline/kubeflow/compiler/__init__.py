"""Compiling for Kubeflow: the pipeline through KubeflowV2DagRunner, then the one place that edits the spec
(pods, platform config, storage, cache keys, parameters, the workers' TFJob template)."""
