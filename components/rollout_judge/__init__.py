"""RolloutJudge: the first step of a run under `serving.rollout: canary`, which judges the canary the last run
pushed (promote, roll back or hold) before anything reads what is served."""
