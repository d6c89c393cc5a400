"""One rule per concept: scheme tests on paths live in `foundation.paths`, the SavedModel's file name in the contract.

The scan reads every product module (not tests) with `ast`, so prose in docstrings is free but code is not:

- a string `"://"` or a bare scheme prefix (`"gs://"`, `"minio://"`, an f-string part ending in `"://"`) outside
  `foundation/paths.py` is a scheme test or a URI built by hand: use `is_remote`, `scheme`, `split_bucket`, `uri`.
  The host-URL parsers (`http://host:port` endpoints, another concept) are allowed by name.
- a string holding `saved_model.pb` outside `foundation/contract.py`: use `SAVED_MODEL_FILE`.
- an HTTP client made or called outside `foundation/redirects.py` (`urlopen`, `build_opener`, a urllib3
  `PoolManager`, `requests.get`/`post`/...) or a `requests.Session()` not handed to `guard_session`: every outgoing
  call goes through the one redirect rule (`open_url`, `guard_pool`, `guard_session`).
- an answer read whole (issue 35, class 3): `.json()` (requests, aiohttp), or `.read()` without a size on what
  `open_url` or an HTTP call returned in a `with`: read it through `foundation.bounded` (`read_capped`).
- JSON parsed outside `foundation/bounded.py` (issue 35, class 8): `json.loads`, `json.load` or `json.JSONDecoder`
  in a product package raises RecursionError on `[[[[…` nested 100 000 deep, a traceback where the caller meant one
  message; parse with `foundation.bounded.parse_json`, whose too-deep JSON is a ValueError like any malformed JSON.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("foundation", "components", "edge", "pipeline", "serving", "bench", "scripts")
PATHS_MODULE = "foundation/paths.py"
CONTRACT_MODULE = "foundation/contract.py"
REDIRECTS_MODULE = "foundation/redirects.py"
BOUNDED_MODULE = "foundation/bounded.py"
# Names that open an HTTP connection or build something that does, without the redirect rule.
_UNGUARDED_HTTP = {"urlopen", "build_opener", "PoolManager", "ProxyManager", "HTTPConnection", "HTTPSConnection"}
_REQUESTS_CALLS = {"get", "post", "put", "patch", "delete", "head", "options", "request"}
# Functions that parse host URLs (endpoints, not paths): file → function names.
HOST_URL_PARSERS = {
    "serving/address.py": {"is_url_address", "rest_base_url", "shown_url", "parse_rest_url", "parse_base_url"},
    "pipeline/kubeflow/client/auth.py": {"check_host"},
    "components/notify/notice.py": {"post_notice"},
}
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)?://")


def _product_files() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


@functools.cache
def _parsed(path: Path, relative: str) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), relative)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    # An attribute docstring: a string statement right after an assignment.
    for node in ast.walk(tree):
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(body, list):
                continue
            for before, statement in itertools.pairwise(body):
                if (
                    isinstance(before, ast.Assign | ast.AnnAssign)
                    and isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant)
                ):
                    found.add(id(statement.value))
    return found


def _strings(tree: ast.AST) -> Iterator[tuple[ast.Constant, str]]:
    """Every string constant outside docstrings, with the function it is in ("" at module level)."""
    docstrings = _docstrings(tree)

    def visit(node: ast.AST, function: str) -> Iterator[tuple[ast.Constant, str]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Constant) and isinstance(child.value, str) and id(child) not in docstrings:
                yield child, function
            yield from visit(child, inner)

    yield from visit(tree, "")


def scheme_tests(path: Path, relative: str) -> list[str]:
    """`file:line: "text"` for each scheme string outside the paths module and the host-URL parsers."""
    if relative == PATHS_MODULE:
        return []
    allowed = HOST_URL_PARSERS.get(relative, set())
    return [
        f"{relative}:{node.lineno}: {node.value!r}"
        for node, function in _strings(_parsed(path, relative))
        if _SCHEME_PREFIX.fullmatch(node.value) or node.value.endswith("://")
        if function not in allowed
    ]


def saved_model_names(path: Path, relative: str) -> list[str]:
    if relative == CONTRACT_MODULE:
        return []
    return [
        f"{relative}:{node.lineno}: {node.value!r}"
        for node, _ in _strings(_parsed(path, relative))
        if "saved_model.pb" in node.value
    ]


def test_scheme_tests_on_paths_live_in_the_paths_module() -> None:
    found = [hit for path in _product_files() for hit in scheme_tests(path, path.relative_to(ROOT).as_posix())]
    assert not found, "use foundation.paths (is_remote, scheme, split_bucket, uri) instead:\n" + "\n".join(found)


def test_the_saved_model_file_is_named_only_in_the_contract() -> None:
    found = [hit for path in _product_files() for hit in saved_model_names(path, path.relative_to(ROOT).as_posix())]
    assert not found, "use foundation.contract.SAVED_MODEL_FILE instead:\n" + "\n".join(found)


def _scan(tmp_path: Path, code: str, relative: str = "components/module.py") -> list[str]:
    """`scheme_tests` of `code` as if it stood at `relative` in the repository."""
    module = tmp_path / "module.py"
    module.write_text(code)
    return scheme_tests(module, relative)


@pytest.mark.parametrize(
    "code",
    [
        'def f(path):\n    return "://" in path\n',
        'def f(path):\n    return "://" not in path\n',
        'def f(path):\n    return path.split("://", 1)[0]\n',
        'def f(path):\n    return path.startswith(("minio://", "s3://"))\n',
        'def f(kind, rest):\n    return f"{kind}://{rest}"\n',
        'MOUNTS = {"gs://": "gcs"}\n',
    ],
)
def test_the_scan_finds_scheme_tests(tmp_path: Path, code: str) -> None:
    assert _scan(tmp_path, code)
    assert not _scan(tmp_path, code, relative=PATHS_MODULE)


@pytest.mark.parametrize(
    "code",
    [
        '"""Reads gs://bucket/x and checks "://" in prose."""\n',
        'def f():\n    """A `gs://` path."""\n    return "use a bucket, e.g. gs://bucket/tfxp"\n',
        'ROOT = "minio://mlpipeline/v2/artifacts"\n"""The default root: minio://."""\n',
    ],
)
def test_the_scan_leaves_prose_and_example_values(tmp_path: Path, code: str) -> None:
    assert not _scan(tmp_path, code)


def test_the_host_url_parser_is_allowed_by_name_only(tmp_path: Path) -> None:
    module = tmp_path / "address.py"
    module.write_text(
        'def is_url_address(text):\n    return "://" in text\n\ndef other(text):\n    return "://" in text\n'
    )
    assert [hit.split(":")[1] for hit in scheme_tests(module, "serving/address.py")] == ["5"]


def test_the_scan_finds_the_saved_model_file_but_not_in_prose(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('"""Holds saved_model.pb."""\nPB = "saved_model.pb"\nTEXT = f"no saved_model.pb in {PB}"\n')
    assert [hit.split(":")[1] for hit in saved_model_names(module, "serving/module.py")] == ["2", "3"]
    assert not saved_model_names(module, CONTRACT_MODULE)


def unguarded_http(path: Path, relative: str) -> list[str]:
    """`file:line: name` for each HTTP client call that bypasses `foundation.redirects`."""
    if relative == REDIRECTS_MODULE:
        return []
    tree = _parsed(path, relative)
    guarded = {
        id(argument)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "guard_session"
        for argument in node.args
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if (
            name in _UNGUARDED_HTTP
            or (owner == "requests" and name in _REQUESTS_CALLS)
            or (owner == "requests" and name == "Session" and id(node) not in guarded)
        ):
            found.append(f"{relative}:{node.lineno}: {name}")
    return found


def test_outgoing_http_goes_through_the_redirect_rule() -> None:
    found = [hit for path in _product_files() for hit in unguarded_http(path, path.relative_to(ROOT).as_posix())]
    assert not found, "use foundation.redirects (open_url, guard_pool, guard_session) instead:\n" + "\n".join(found)


_HTTP_CASES = [
    ("import urllib.request\nurllib.request.urlopen('x')\n", 1),
    ("from urllib.request import urlopen, build_opener\nurlopen('x')\nbuild_opener()\n", 2),
    ("import requests\nrequests.get('x')\nrequests.Session()\n", 2),
    ("import requests\nfrom foundation.redirects import guard_session\nguard_session(requests.Session())\n", 0),
    ("import urllib3\nurllib3.PoolManager()\n", 1),
    ("d = {}\nd.get('x')\n", 0),
]
_READ_CASES = [
    ("with open_url(u, 5) as answer:\n    body = answer.read()\n", 1),
    ("async def f(s):\n    async with s.post(u) as response:\n        return await response.read()\n", 1),
    ("body = session.request('GET', u).json()\n", 1),
    ("with open_url(u, 5) as answer:\n    body = read_capped(answer.read, 10, error)\n", 0),
    ("with open_url(u, 5) as answer:\n    body = answer.read(100)\n", 0),
    ("with open(p) as handle:\n    text = handle.read()\n", 0),
]

_WHOLE_READ_CASES = [
    ("value = parse_json(path.read_text())\n", 1),
    ("value = parse_json(paths.read_bytes(p))\n", 1),
    ("def f(path):\n    text = path.read_text()\n    return parse_json(text)\n", 1),
    ("record = Decision.from_json(paths.read_text(p))\n", 1),
    ("json_format.Parse(Path(p).read_text(), message)\n", 1),
    ("value = parse_json(read_document(p, 'record'))\n", 0),
    ("text = path.read_text()\nprint(text)\n", 0),
    ("def f(path):\n    text = path.read_text()\ndef g(text):\n    return parse_json(text)\n", 0),
]


@pytest.mark.parametrize(
    ("scan", "owner", "code", "hits"),
    [("http", REDIRECTS_MODULE, *case) for case in _HTTP_CASES]
    + [("reads", BOUNDED_MODULE, *case) for case in _READ_CASES]
    + [("whole reads", "foundation/model_identity.py", *case) for case in _WHOLE_READ_CASES],
)
def test_the_scans_find_what_they_forbid(tmp_path: Path, scan: str, owner: str, code: str, hits: int) -> None:
    find = {"http": unguarded_http, "reads": unbounded_answer_reads, "whole reads": whole_read_parses}[scan]
    module = tmp_path / "module.py"
    module.write_text(code)
    assert len(find(module, "serving/module.py")) == hits
    assert not find(module, owner)


_ANSWERING_CALLS = {"open_url", "urlopen", "get", "post", "put", "patch", "delete", "request"}


def _called_name(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def unbounded_answer_reads(path: Path, relative: str) -> list[str]:
    """`file:line: how` for each answer read whole: `.json()`, or `.read()` with no size on a `with` answer."""
    if relative == BOUNDED_MODULE:
        return []
    tree = _parsed(path, relative)
    found = [
        f"{relative}:{node.lineno}: .json()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called_name(node) == "json" and not node.args and not node.keywords
    ]
    for block in ast.walk(tree):
        if not isinstance(block, ast.With | ast.AsyncWith):
            continue
        answers = {
            item.optional_vars.id
            for item in block.items
            if isinstance(item.optional_vars, ast.Name) and _called_name(item.context_expr) in _ANSWERING_CALLS
        }
        for node in (inner for statement in block.body for inner in ast.walk(statement)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "read"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in answers
                and not node.args
            ):
                found.append(f"{relative}:{node.lineno}: {node.func.value.id}.read()")
    return found


def test_answers_are_read_through_the_bounded_reader() -> None:
    found = [
        hit for path in _product_files() for hit in unbounded_answer_reads(path, path.relative_to(ROOT).as_posix())
    ]
    assert not found, "read answers through foundation.bounded.read_capped, with a cap:\n" + "\n".join(found)


# The packages tfxp ships (bench/ and scripts/ are tools beside them) and the modules of them that may parse JSON
# with the standard library, each with why: a module here reads only text tfxp itself wrote.
JSON_PACKAGES = ("foundation", "components", "edge", "pipeline", "serving")
JSON_PARSERS_ALLOWED = {
    BOUNDED_MODULE: "the one reader, parse_json",
    # Runs in the MediaPipe venv, which holds no tfxp package to import; it parses the spec and manifest
    # edge.app_client writes for it, and tflite-support's rendering of a metadata flatbuffer (a fixed schema, a few
    # levels deep). What it prints back is parsed by edge.app_client with parse_json.
    "edge/mediapipe_guest.py": "the MediaPipe guest",
}
_JSON_PARSERS = {"loads", "load", "JSONDecoder"}


def json_parsers(path: Path, relative: str) -> list[str]:
    """`file:line: json.name` for each standard-library JSON parser used outside `JSON_PARSERS_ALLOWED`."""
    if relative in JSON_PARSERS_ALLOWED:
        return []
    tree = _parsed(path, relative)
    modules = {"json"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "json" and alias.asname
    }
    found = [
        f"{relative}:{node.lineno}: json.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "json"
        for alias in node.names
        if alias.name in _JSON_PARSERS
    ]
    found += [
        f"{relative}:{node.lineno}: json.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in _JSON_PARSERS
        if isinstance(node.value, ast.Name) and node.value.id in modules
    ]
    return found


def test_json_from_outside_is_parsed_by_the_bounded_reader() -> None:
    files = sorted(path for package in JSON_PACKAGES for path in (ROOT / package).rglob("*.py"))
    found = [hit for path in files for hit in json_parsers(path, path.relative_to(ROOT).as_posix())]
    assert not found, "parse JSON with foundation.bounded.parse_json instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("code", "hits"),
    [
        ("import json\nvalue = json.loads(text)\n", 1),
        ("import json\nwith open(p) as f:\n    value = json.load(f)\n", 1),
        ("from json import loads, dumps\nvalue = loads(text)\n", 1),
        ("import json as j\nvalue = j.loads(text)\n", 1),
        ("import json\nparse = json.loads\ndecoder = json.JSONDecoder()\n", 2),
        ("import json\ntext = json.dumps(value)\n", 0),
        ("from foundation.bounded import parse_json\nvalue = parse_json(text)\n", 0),
        ('"""Reads it with json.loads, which recurses."""\n', 0),
    ],
)
def test_the_json_scan_finds_what_it_forbids(tmp_path: Path, code: str, hits: int) -> None:
    module = tmp_path / "module.py"
    module.write_text(code)
    assert len(json_parsers(module, "serving/module.py")) == hits
    assert not json_parsers(module, BOUNDED_MODULE)


# Parsers of records and documents; what they parse is read through foundation.bounded (a regular file only,
# capped), never whole with `read_text()` / `read_bytes()` (`Path`'s or `foundation.paths`'): a FIFO in a record's
# place blocked `tfxp report` forever and a sparse 3 GB state.json took 5.5 GB (issue 35, third adversarial pass).
_RECORD_PARSERS = {"parse_json", "parse_record", "from_json", "model_validate_json", "parse_model_config", "Parse"}
_WHOLE_READS = {"read_text", "read_bytes"}
WHOLE_READS_ALLOWED = {
    "foundation/model_identity.py": "the model identity's own reader (owned apart; it reads a version's files)",
    "serving/k8s_crds.py": "CRD schemas shipped in tfxp's package, not files a run or a user left",
    "serving/k8s_check.py": "Kubernetes schemas shipped in tfxp's package, not files a run or a user left",
}


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `scope`, not those of the functions defined in it."""
    for child in ast.iter_child_nodes(scope):
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield child
            yield from _own_nodes(child)


def whole_read_parses(path: Path, relative: str) -> list[str]:
    """`file:line: parser(… read_text())` for each record parsed from a whole-file read (directly, or through a
    name the same function assigned from one)."""
    if relative in WHOLE_READS_ALLOWED:
        return []
    tree = _parsed(path, relative)
    found = []
    for scope in [tree, *(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))]:
        own = list(_own_nodes(scope))
        read_names = {
            target.id
            for node in own
            if isinstance(node, ast.Assign) and _called_name(node.value) in _WHOLE_READS
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in own:
            if not isinstance(node, ast.Call) or _called_name(node) not in _RECORD_PARSERS:
                continue
            for argument in node.args:
                if _called_name(argument) in _WHOLE_READS or (
                    isinstance(argument, ast.Name) and argument.id in read_names
                ):
                    found.append(f"{relative}:{node.lineno}: {_called_name(node)}(… {ast.unparse(argument)})")
    return sorted(set(found))


def test_records_are_parsed_from_bounded_reads() -> None:
    files = sorted(path for package in JSON_PACKAGES for path in (ROOT / package).rglob("*.py"))
    found = [hit for path in files for hit in whole_read_parses(path, path.relative_to(ROOT).as_posix())]
    assert not found, "read it with foundation.bounded.read_document or foundation.records.read_record:\n" + "\n".join(
        found
    )
