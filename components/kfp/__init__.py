"""What runs inside a Kubeflow Pipelines pod besides the TFX executors.

Modules:
    launcher_paths: Where KFP's launcher puts an artifact's files in the pod (`LocalPathForURI`), and which URIs
        TensorFlow and Beam open themselves.
    entrypoint: The container entrypoint of every TFX task: TFX's v2 executor runner, given the executor input
        as the open-source backend (and Vertex AI) builds it.
    fingerprint_task: The small uncached task whose outputs key KFP's cache (the selected spans' files, the
        served versions).
"""
