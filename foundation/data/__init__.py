"""Where the data is and what it holds: layouts, split patterns, spans, the TFRecord files, the label-map probe."""
