"""Data tools: the digits data set, class folders to TFRecords, image checks, inspect, span writing, fingerprints."""
