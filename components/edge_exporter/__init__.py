"""EdgeExporter: the TFX component that turns the trained model into a gated, pushed TFLite model.

Thin glue over `edge.export` and `edge.publish`: `artifacts` (EdgeModel, EdgeBlessing), `spec`
(EdgeExporterSpec), `executor` (reads the artifacts, calls edge, writes and pushes), `component` (EdgeExporter)
and `summary` (the run summary's edge fields, read from an EdgeModel directory).
"""
