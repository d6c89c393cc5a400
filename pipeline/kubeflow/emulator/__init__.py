"""`tfxp run-spec`: a compiled spec run here task by task, on an emulated KFP backend derived from its source."""
