"""Serving: the TF Serving-compatible local server, the gRPC/REST client, the load test, and the deploy assets
(models.config, batching, monitoring, Kubernetes and KServe manifests) for TensorFlow Serving."""
