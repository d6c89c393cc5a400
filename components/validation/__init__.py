"""Data checks between ExampleGen and the Trainer: label-map schema, strict ExampleValidator, span drift."""
