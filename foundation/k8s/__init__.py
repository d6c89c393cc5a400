"""Kubernetes' own rules as plain data, for serving and Kubeflow alike: quantities, object names, image references."""
