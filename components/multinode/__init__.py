"""Multi-node training in one place: what each worker receives (`worker_args`), the worker entrypoint (`worker`),
the Trainer task's side (`launch`: local processes through `local_workers`, or a TFJob through `tfjob_launch`), and
the TFJob itself: its manifest (`tfjob`), the API calls (`tfjob_api`, `api_answers`), the client that submits,
follows and deletes it (`tfjob_client`), its status, diagnosis and errors."""
