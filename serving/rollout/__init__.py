"""Guarded rollout: a pushed model serves as the canary beside the stable one, is judged on live traffic, and is
promoted or rolled back; the state of each model's rollout lives beside its versions under the serving base."""
