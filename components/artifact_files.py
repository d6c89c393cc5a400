"""Reading artifact files, local or on a bucket: the names of `components.paths` that the report's readers use.

`components.paths` owns them; this module only keeps the import path of callers that other branches still name.
New code imports `components.paths`.
"""

from components.paths import children, is_dir, is_file, read_bytes, read_text, tree_bytes

__all__ = ["children", "is_dir", "is_file", "read_bytes", "read_text", "tree_bytes"]
