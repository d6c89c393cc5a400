"""The served model as the Evaluator's baseline, on every orchestrator.

Plain modules: `served` (find the newest complete version under the serving base path, check it loads and
has the eval signatures, copy it) and `reason` (the one-line verdict naming the served version). TFX glue:
`spec` (ServedBaselineSpec), `driver` (the local runner's cache key follows the served version), `executor`
(writes the Model artifact), `component` (ServedBaseline) and `evaluator` (TFX's Evaluator, which skips an
empty baseline: nothing served yet).
"""
