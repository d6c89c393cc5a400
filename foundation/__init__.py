"""The shared base every other package may import, and which imports none of them: user errors, paths on disk
and buckets, the model and data contract, published versions, YAML, deadlines and stop requests, the redirect rule
of outgoing HTTP calls, credentials, image headers, config sections, data layouts and TFRecords, the model's
preprocessing contract, Kubernetes quantities, names and image references."""
