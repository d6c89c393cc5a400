"""The run notice a Kubeflow exit handler posts (`notice`: plain Python; `component`: the TFX exit handler)."""
