"""YAML from files a user hands tfxp, read with aliases and nesting bounded: the one loader for configs, compiled
pipeline specs and manifests.

PyYAML's `safe_load` builds an alias (`*name`) as a second reference to the anchored object, so a 48 KB
"billion laughs" file loads quickly, and then anything that walks the result (protobuf's `ParseDict`, `json.dumps`,
a POST of the spec) expands it to gigabytes. An anchor aliased inside itself (`&a [*a]`) builds a cycle that
those walkers recurse on forever. This loader composes the node graph first, counting what each alias would
expand to (a long text counts a node per `SCALAR_CHARS_PER_NODE` characters), and refuses a document that would
expand by more than `MAX_ALIAS_NODES` nodes, uses more than `MAX_ALIASES` aliases, aliases an anchor inside itself,
or nests deeper than `MAX_DEPTH`; the error names the file and the line. A few aliases (`<<: *defaults` in a
config) stay well within the budget. A key written twice in one mapping is refused too, naming both lines: PyYAML
keeps the last one silently, so `trainer:` written twice would drop the first section without a word (keys
brought in by a `<<` merge may be overridden, as YAML's merge key means).

Example:
    documents = read_yaml_all(Path("pipeline.yaml"))       # list of documents
    config = load_yaml(text, source="configs/default.yaml", loader=Yaml12Loader)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from foundation.bounded import read_document

# Aliases a document may use, and the nodes their expansion may add in all: far above what hand-written configs
# use, far below what hurts (a 9×9 alias bomb expands to 387 million nodes).
MAX_ALIASES = 100
MAX_ALIAS_NODES = 10_000
# A scalar counts one node more per this many characters.
SCALAR_CHARS_PER_NODE = 100
# Nesting depth of collections; PyYAML's composer recurses once per level.
MAX_DEPTH = 200


class YamlRefusedError(yaml.YAMLError):
    """YAML that parses, but that tfxp refuses; the message is whole (file, line, what, the fix): callers pass it on
    as it is, never as "not YAML"."""


class YamlLimitError(YamlRefusedError):
    """The document's aliases or nesting exceed the limits; the message names the file, the line and the fix."""


class YamlDuplicateKeyError(YamlRefusedError):
    """A mapping holds the same key twice; the message names the file, both lines and the key."""


class _Bounded:
    """A composer mixin for a PyYAML loader class: counts aliases and their expansion, and the nesting depth."""

    source = "<yaml>"

    def _reset_bounds(self) -> None:
        self._aliases = 0
        self._expanded = 0
        self._depth = 0
        self._open: set[str] = set()
        self._weights: dict[int, int] = {}
        self._checked_mappings: set[int] = set()

    def compose_document(self) -> Any:
        self._reset_bounds()
        return super().compose_document()  # type: ignore[misc]

    def _weight(self, node: yaml.Node) -> int:
        # Nodes the subtree expands to, with shared subtrees counted each time (capped just past the budget).
        known = self._weights.get(id(node))
        if known is not None:
            return known
        weight = 1
        if isinstance(node, yaml.ScalarNode):
            weight += len(node.value) // SCALAR_CHARS_PER_NODE  # a long text aliased many times is a bomb too
        elif isinstance(node, yaml.SequenceNode):
            weight += sum(self._weight(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            weight += sum(self._weight(key) + self._weight(value) for key, value in node.value)
        weight = min(weight, MAX_ALIAS_NODES + 1)
        self._weights[id(node)] = weight
        return weight

    def _refuse(self, mark: Any, problem: str) -> YamlLimitError:
        line = f", line {mark.line + 1}" if mark is not None else ""
        return YamlLimitError(f"{self.source}{line}: {problem}")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        # Before SafeConstructor flattens `<<` merges into node.value (merged keys may be overridden).
        if isinstance(node, yaml.MappingNode) and id(node) not in self._checked_mappings:
            self._checked_mappings.add(id(node))
            first_lines: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)  # type: ignore[attr-defined]
                line = key_node.start_mark.line + 1
                if key in first_lines:
                    raise YamlDuplicateKeyError(
                        f"{self.source}, line {line}: the key {key!r} is written twice in one mapping (first at line "
                        f"{first_lines[key]}); YAML would keep only the last silently. Remove one, or merge them"
                    )
                first_lines[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor
            if anchor in self._open:
                raise self._refuse(
                    event.start_mark,
                    f"the alias *{anchor} is inside its own anchor &{anchor}, which makes an endless structure; "
                    "write the value out instead",
                )
            anchored = self.anchors.get(anchor)  # type: ignore[attr-defined]
            self._aliases += 1
            self._expanded += self._weight(anchored) if anchored is not None else 0
            if self._aliases > MAX_ALIASES or self._expanded > MAX_ALIAS_NODES:
                too_many = (
                    f"more than {MAX_ALIASES} YAML aliases (*{anchor} is one too many)"
                    if self._aliases > MAX_ALIASES
                    else f"YAML aliases (*{anchor} and the ones before it) that expand to more than "
                    f"{MAX_ALIAS_NODES} nodes"
                )
                raise self._refuse(
                    event.start_mark,
                    f"{too_many}; tfxp refuses such files (an alias bomb costs gigabytes once expanded): write the "
                    "values out instead of aliasing them",
                )
            return super().compose_node(parent, index)  # type: ignore[misc]
        collection = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        anchor = getattr(event, "anchor", None)
        if collection:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise self._refuse(
                    event.start_mark, f"lists and mappings nest deeper than {MAX_DEPTH} levels; flatten the file"
                )
            if anchor:
                self._open.add(anchor)
        try:
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            if collection:
                self._depth -= 1
                self._open.discard(anchor or "")


class BoundedSafeLoader(_Bounded, yaml.SafeLoader):
    """`yaml.SafeLoader` with the limits of this module."""


class Yaml12Loader(BoundedSafeLoader):
    """`BoundedSafeLoader` whose booleans are YAML 1.2's `true`/`false` only.

    PyYAML follows YAML 1.1, where `on`, `off`, `yes` and `no` are booleans too, so `trainer.xla: on` would
    arrive as True instead of the setting "on".
    """


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _loader(text: str, source: str, loader: type[BoundedSafeLoader]) -> BoundedSafeLoader:
    instance = loader(text)
    instance.source = source
    return instance


def load_yaml(text: str, source: str, loader: type[BoundedSafeLoader] = BoundedSafeLoader) -> Any:
    """The single document in `text` (None when empty), within the limits.

    Args:
        text: The YAML.
        source: Where it comes from (a path, `--set x=y`), for messages.
        loader: `BoundedSafeLoader` or `Yaml12Loader`.

    Raises:
        YamlRefusedError: aliases or nesting beyond the limits, or a key written twice in one mapping (a
            `yaml.YAMLError`).
        yaml.YAMLError: not YAML, or more than one document.
    """
    instance = _loader(text, source, loader)
    try:
        return instance.get_single_data()
    finally:
        instance.dispose()


def load_yaml_all(text: str, source: str, loader: type[BoundedSafeLoader] = BoundedSafeLoader) -> list[Any]:
    """Every document in `text`, within the limits (each document has the whole budget).

    Raises:
        YamlRefusedError: as `load_yaml`.
        yaml.YAMLError: not YAML.
    """
    instance = _loader(text, source, loader)
    try:
        documents = []
        while instance.check_data():
            documents.append(instance.get_data())
        return documents
    finally:
        instance.dispose()


def read_yaml(path: Path, loader: type[BoundedSafeLoader] = BoundedSafeLoader) -> Any:
    """`load_yaml` of a file, named by its path in messages.

    Raises:
        OSError, UnicodeDecodeError: the file cannot be read as text.
        foundation.bounded.TooLargeError: larger than MAX_DOCUMENT_BYTES.
        yaml.YAMLError: as `load_yaml`.
    """
    return load_yaml(read_document(path, f"YAML file {path}"), str(path), loader)


def read_yaml_all(path: Path, loader: type[BoundedSafeLoader] = BoundedSafeLoader) -> list[Any]:
    """`load_yaml_all` of a file, named by its path in messages.

    Raises:
        OSError, UnicodeDecodeError: the file cannot be read as text.
        yaml.YAMLError: as `load_yaml_all`.
    """
    return load_yaml_all(read_document(path, f"YAML file {path}"), str(path), loader)
