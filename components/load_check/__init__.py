"""LoadCheck: a model is loaded and answers in a real serving process before the Pusher publishes it.

The plain work is `serving.load_check`; TFX glue: `spec` (LoadCheckSpec and the names the readers share),
`executor` (samples the eval split, runs the check, writes the InfraBlessing) and `component` (LoadCheck).
"""
