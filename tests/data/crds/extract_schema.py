"""Writes the openAPIV3Schema of one kind and version of a CRD file as compact JSON, every description dropped.

Usage: python tests/data/crds/extract_schema.py CRD.yaml KIND VERSION OUT.json   (README.md names the sources)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def without_descriptions(node: Any) -> Any:
    """`node` with every `description` string dropped (the only change made to a pinned schema)."""
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def main(source: str, kind: str, version: str, out: str) -> None:
    for document in yaml.safe_load_all(Path(source).read_text()):
        if (
            document
            and document.get("kind") == "CustomResourceDefinition"
            and document["spec"]["names"]["kind"] == kind
        ):
            for entry in document["spec"]["versions"]:
                if entry["name"] == version:
                    schema = without_descriptions(entry["schema"]["openAPIV3Schema"])
                    Path(out).write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True))
                    return
    raise SystemExit(f"no {kind} {version} in {source}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
