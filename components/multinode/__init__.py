"""Multi-node training in one place: what each worker receives (`worker_args`), the worker entrypoint (`worker`),
the Trainer task's side (`launch`: local processes through `local_workers`, or a TFJob through `tfjob_launch`), and
the TFJob itself: its manifest (`tfjob`, with `tfjob_names`, `tfjob_binding` and `tfjob_rbac`), the API calls
(`tfjob_api`, `api_answers`), the client that submits, follows and deletes it (`tfjob_client`, with `tfjob_submit`
and `tfjob_follow`), its status, diagnosis and errors."""
