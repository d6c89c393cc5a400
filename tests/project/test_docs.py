"""Every repository path, `tfxp` command and option, `make` target and relative link that the docs name exists.

The docs are README.md and docs/*.md. What counts as a name, and what is left out on purpose:

- Code: inline code spans and fenced code blocks. Prose outside backticks is never read.
- Repository paths: a token in code with a `/` whose first segment is a top-level entry of the repository that
  .gitignore does not ignore (`components/...`, `tests/...`, `.ci/run`, `docs/...`). Its `:LINE` suffix (a source
  citation) and `::test` suffix (a pytest node id) are dropped; a glob must match at least one path. Left out:
  - anything whose first segment is not such an entry: outputs and placeholders (`OUT/...`, `DIR/...`,
    `tfxp_output/...`, `data/digits`: ignored by git or not in it), paths inside artifacts (`assets/labels.txt`),
    paths of other projects cited by file (`driver/k8s.go:158`, `tfx/orchestration/...`), feature names
    (`image/encoded`) and absolute paths (`/tmp`);
  - tokens with a URL scheme (`://`), a variable (`$`), a placeholder (`<...>`, `{...}`, `…`, `...`);
  - paths under something .gitignore names (`bench/results/`): outputs that exist only after a run.
  A bare file name (`server.py`) is checked only for source files (`.py`, `.sh`, `.cc`): some file of that name
  must exist in the repository; output files (`labels.txt`, `model.tflite`) are not checked.
- `tfxp` commands: a code line or inline span that starts with `tfxp` (after `VAR=value` assignments); also
  after `|`, `&&`, `;`, `&` in a code block. Every subcommand must exist in the Typer app's Click tree
  (`typer.main.get_command`), `a|b` in a subcommand's place naming alternatives; a capitalised word there
  (`tfxp COMMAND --help`) is a placeholder and ends the check. Every `--option` / `-o` after it must be one of
  that command's options (or `--help`); an option that takes a value skips that value. Synopses may wrap options
  in `[...]`/`(...)` and separate alternatives with ` | ` inside parentheses.
- `make X`: a code line or inline span starting with `make`; X must be a target of the Makefile.
- Links: every `[text](target)` outside code that is not a URL must resolve to a file, relative to the document,
  and a `#anchor` into a Markdown file must be one of its headings' GitHub anchors.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer.main

from pipeline.cli.app import COMMANDS, app

if TYPE_CHECKING:
    from typer import _click as click  # Typer vendors Click; its commands and contexts are these classes.

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 250
# Bare file names of these kinds are repository files; other bare names (labels.txt, model.tflite) are outputs.
SOURCE_SUFFIXES = (".py", ".sh", ".cc")
# Bare source file names of other projects that the docs cite.
EXTERNAL_SOURCES = {"build_imagenet_data.py"}
SHELL_OPERATORS = {"|", "||", "&&", ";", "&"}
PLACEHOLDER = re.compile(r"[<>{}$…]|\.\.\.")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINE_SUFFIX = re.compile(r":\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


@dataclass(frozen=True)
class Code:
    """A piece of code the docs show: one inline span, or one (continued) line of a fenced block."""

    doc: Path
    line: int
    text: str
    block: bool

    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def code_in(doc: Path, text: str | None = None) -> list[Code]:
    """The inline code spans and code-block lines of a Markdown document, with their line numbers."""
    lines = (doc.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Code] = []
    prose: list[str] = []
    in_block = False
    pending = ""
    pending_line = 0
    for number, line in enumerate(lines, start=1):
        if FENCE.match(line):
            in_block = not in_block
            prose.append("")
            continue
        if in_block:
            prose.append("")
            # A trailing backslash continues a shell command on the next line.
            if not pending:
                pending_line = number
            pending += line
            if line.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            found.append(Code(doc, pending_line, pending, block=True))
            pending = ""
        else:
            prose.append(line)
    text_outside = "\n".join(prose)
    for match in INLINE_CODE.finditer(text_outside):
        # In a table row a `|` inside code is written `\|`.
        span = match.group(1).replace("\n", " ").replace("\\|", "|")
        found.append(Code(doc, text_outside.count("\n", 0, match.start()) + 1, span, block=False))
    return found


def prose_in(doc: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """The lines outside code blocks, inline code blanked out, with their numbers."""
    in_block = False
    for number, line in enumerate((doc.read_text(encoding="utf-8") if text is None else text).splitlines(), 1):
        if FENCE.match(line):
            in_block = not in_block
        elif not in_block:
            yield number, INLINE_CODE.sub("``", line)


def words(text: str) -> list[str]:
    """Shell words when the text parses as shell, else whitespace-separated words (prose in a synopsis)."""
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


# Repository paths


def _gitignore_patterns() -> list[str]:
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith(("#", "!"))]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .gitignore ignores `path` or a folder above it (the subset of gitignore's rules it uses)."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: index + 1]) for index in range(len(parts))]
    for pattern in patterns:
        bare = pattern.strip("/")
        if "/" in bare or pattern.startswith("/"):  # anchored at the repository root
            if any(fnmatch.fnmatchcase(prefix, bare) for prefix in prefixes):
                return True
        elif any(fnmatch.fnmatchcase(part, bare) for part in parts):
            return True
    return False


def top_level_entries() -> set[str]:
    patterns = _gitignore_patterns()
    return {entry.name for entry in REPO.iterdir() if entry.name != ".git" and not ignored(entry.name, patterns)}


def repository_file_names(patterns: list[str]) -> set[str]:
    """The names of the files in the repository, outside what .gitignore ignores (a venv, outputs)."""
    names: set[str] = set()
    for folder, subfolders, files in os.walk(REPO):
        relative = Path(folder).relative_to(REPO)
        subfolders[:] = [name for name in subfolders if name != ".git" and not ignored(str(relative / name), patterns)]
        names.update(name for name in files if not ignored(str(relative / name), patterns))
    return names


def path_candidates(code: Code) -> Iterator[str]:
    """Tokens of a code piece that look like paths, cleaned of quotes, punctuation and citation suffixes."""
    for token in code.text.split():
        token = token.split("=")[-1]  # --out=path, VAR=path
        token = token.strip("`'\"()[],;")
        token = token.rstrip(".:")
        token = token.split("::")[0]
        token = LINE_SUFFIX.sub("", token)
        if not token or "://" in token or PLACEHOLDER.search(token) or token.startswith(("/", "~", "-")):
            continue
        yield token


def path_problems(codes: list[Code]) -> tuple[list[str], int]:
    """Paths that do not exist, as `file:line: message`, and how many paths were checked."""
    top = top_level_entries()
    patterns = _gitignore_patterns()
    files = repository_file_names(patterns)
    problems: list[str] = []
    checked = 0
    for code in codes:
        for token in path_candidates(code):
            first = token.split("/")[0]
            if "/" not in token:
                if token.endswith(SOURCE_SUFFIXES) and token not in EXTERNAL_SOURCES:
                    checked += 1
                    if token not in files:
                        problems.append(f"{code.where()}: no file named {token} in the repository")
                continue
            if first not in top or ignored(token, patterns):
                continue
            checked += 1
            relative = token.rstrip("/")
            exists = bool(glob.glob(str(REPO / relative))) if glob.has_magic(relative) else (REPO / relative).exists()
            if not exists:
                problems.append(f"{code.where()}: {token} does not exist in the repository")
    return problems, checked


# tfxp commands and make targets


def command_tree() -> click.Command:
    return typer.main.get_command(app)


def _subcommand(group: click.Command, name: str) -> click.Command | None:
    context = group.context_class(group, info_name=group.name)
    return group.get_command(context, name) if hasattr(group, "get_command") else None


def _options(command: click.Command) -> dict[str, bool]:
    """Option name → whether it takes a value."""
    options = {"--help": False}
    for param in command.params:
        if param.param_type_name != "option":
            continue
        for name in [*param.opts, *param.secondary_opts]:
            options[name] = not (param.is_flag or param.count)
    return options


def command_lines(code: Code) -> Iterator[list[str]]:
    """The word lists of the `tfxp ...` commands in a code piece, each starting at `tfxp`."""
    tokens = words(code.text)
    segments: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        if token in SHELL_OPERATORS and depth == 0:
            if not code.block:  # inline, `a | b` is prose (or a synopsis' alternative), not a pipe
                break
            segments.append([])
            continue
        depth += token.count("(") - token.count(")")
        segments[-1].append(token)
    for segment in segments:
        while segment and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", segment[0]):
            segment = segment[1:]
        if segment and segment[0] == "tfxp":
            yield segment


def command_problems(codes: list[Code]) -> tuple[list[str], int]:
    """Subcommands and options the docs name that the app does not have, and how many commands were checked."""
    root = command_tree()
    problems: list[str] = []
    checked = 0
    for code in codes:
        for line in command_lines(code):
            checked += 1
            problems += _check_command(root, line, code.where())
    return problems, checked


def _check_command(root: click.Command, line: list[str], where: str) -> list[str]:
    command, path = root, ["tfxp"]
    rest = line[1:]
    # Options of the root (`tfxp -v COMMAND`) come before the command.
    root_options = _options(root)
    while rest and rest[0].startswith("-"):
        if rest[0] not in root_options:
            return [f"{where}: `tfxp` has no option {rest[0]} (`{' '.join(line)}`)"]
        rest = rest[1:]
    while rest and hasattr(command, "get_command"):
        word = rest[0]
        if not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", word):
            if word.startswith("-"):
                break  # a group's own options, e.g. `tfxp data --help`
            return []  # a placeholder (`tfxp COMMAND --help`): nothing more to check
        alternatives = word.split("|")
        found = {name: _subcommand(command, name) for name in alternatives}
        missing = [name for name, sub in found.items() if sub is None]
        if missing:
            known = ", ".join(command.list_commands(command.context_class(command)))
            return [f"{where}: `{' '.join(path)}` has no command {', '.join(missing)} (it has {known})"]
        if len(alternatives) > 1:
            # Alternatives share the options that follow: each must have them.
            return [
                problem
                for name, sub in found.items()
                for problem in _check_options(sub, [*path, name], rest[1:], where)
            ]
        command, path, rest = found[word], [*path, word], rest[1:]
    return _check_options(command, path, rest, where)


def _check_options(command: click.Command, path: list[str], rest: list[str], where: str) -> list[str]:
    options = _options(command)
    problems = []
    skip = False
    for token in rest:
        if skip:
            skip = False
            continue
        word = token.strip("[]()")
        if not re.fullmatch(r"--?[A-Za-z][A-Za-z0-9-]*(=.*)?", word):
            continue
        name = word.split("=")[0]
        if name not in options:
            problems.append(
                f"{where}: `{' '.join(path)}` has no option {name}; its options are "
                f"{', '.join(sorted(option for option in options if option.startswith('--')))}"
            )
            continue
        skip = options[name] and "=" not in word and not token.endswith(("]", ")"))
    return problems


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {match.group(1) for match in re.finditer(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE)}


def make_problems(codes: list[Code]) -> tuple[list[str], int]:
    targets = make_targets()
    problems: list[str] = []
    checked = 0
    for code in codes:
        for segment in _segments(words(code.text)):
            if not segment or segment[0] != "make":
                continue
            named = [word for word in segment[1:] if "=" not in word and not word.startswith("-")]
            for target in named[:1] if not code.block else named:
                if not re.fullmatch(r"[a-z][\w-]*", target):
                    break
                checked += 1
                if target not in targets:
                    problems.append(
                        f"{code.where()}: the Makefile has no target {target} (it has {', '.join(sorted(targets))})"
                    )
    return problems, checked


def _segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in SHELL_OPERATORS:
            segments.append([])
        else:
            segments[-1].append(token)
    return segments


# Links


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown text's headings: lower case, punctuation dropped, spaces as hyphens."""
    seen: dict[str, int] = {}
    result = set()
    in_block = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_block = not in_block
            continue
        match = HEADING.match(line)
        if in_block or not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2))  # a link in a heading keeps its text
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def link_problems(docs: dict[Path, str]) -> tuple[list[str], int]:
    """Links (document → its text) that name no file, or no heading of a Markdown file."""
    problems: list[str] = []
    checked = 0
    for doc, text in docs.items():
        for number, line in prose_in(doc, text):
            for match in LINK.finditer(line):
                target = match.group(2)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                checked += 1
                file_part, _, anchor = target.partition("#")
                where = f"{doc.relative_to(REPO)}:{number}"
                linked = (doc.parent / file_part).resolve() if file_part else doc
                if not linked.exists() and file_part:
                    problems.append(f"{where}: the link to {target} names no file")
                    continue
                headings = anchors(text) if linked == doc else anchors(linked.read_text(encoding="utf-8"))
                if anchor and linked.suffix == ".md" and anchor not in headings:
                    problems.append(f"{where}: {linked.name} has no heading with the anchor #{anchor}")
    return problems, checked


def _all_code() -> list[Code]:
    return [code for doc in DOCS for code in code_in(doc)]


def _report(problems: list[str], what: str) -> str:
    return f"{len(problems)} {what} in the docs do not exist; fix the docs (or the code):\n" + "\n".join(problems)


def test_the_readme_fits_on_a_screen() -> None:
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move the details into a guide under docs/"
    )


def test_the_readme_tours_every_command() -> None:
    readme = REPO / "README.md"
    named = {line[1] for code in code_in(readme) if not code.block for line in command_lines(code) if line[1:]}
    missing = [name for name in COMMANDS if name not in named]
    assert not missing, (
        f"README.md's tour of the CLI does not name `tfxp {'`, `tfxp '.join(missing)}`: add a row for each "
        "(pipeline/cli/app.py, COMMANDS, lists every command)"
    )


def test_every_repository_path_the_docs_name_exists() -> None:
    problems, checked = path_problems(_all_code())
    assert checked > 100, (
        f"only {checked} paths found in the docs: the rule in tests/project/test_docs.py finds too little"
    )
    assert not problems, _report(problems, "paths")


def test_every_tfxp_command_and_option_the_docs_name_exists() -> None:
    problems, checked = command_problems(_all_code())
    assert checked > 50, (
        f"only {checked} tfxp commands found in the docs: the rule in tests/project/test_docs.py finds too little"
    )
    assert not problems, _report(problems, "commands or options")


def test_every_make_target_the_docs_name_exists() -> None:
    problems, checked = make_problems(_all_code())
    assert checked >= 5, f"only {checked} make targets found in the docs"
    assert not problems, _report(problems, "make targets")


def test_every_relative_link_in_the_docs_resolves() -> None:
    problems, checked = link_problems({doc: doc.read_text(encoding="utf-8") for doc in DOCS})
    assert checked >= 20, f"only {checked} links found in the docs"
    assert not problems, _report(problems, "links")


# The rules themselves, on a document with one wrong name of each kind (and right ones that must pass).

WRONG = """# Title

Run `tfxp data digitz --out DIR` or `tfxp run --outptu DIR`; see `components/no_such_module.py:12`,
`pipeline/cli/app.py:30`, `tests/project/test_docs.py::test_x`, `OUT/serving/x`, `make tset`, `make demo`,
[a guide](no-such-guide.md), [a section](#no-such-section), [this one](#title),
[the data](data.md#spans-data-that-arrives-over-time)

| command | what |
| --- | --- |
| `tfxp runs list\\|get` | fine |

```bash
tfxp serve --model-base tfxp_output/serving/digits &
tfxp edge verify m.tflite --cpu cortex-a53 --samples 10 | tee out.txt
tfxp schedule list|pause --host URL --nope
tfxp -v COMMAND --help
make demo PYTHON=python3.11
```
"""


def test_the_rules_find_each_wrong_name_and_pass_the_right_ones() -> None:
    doc = REPO / "docs" / "WRONG.md"  # never written: its text is parsed as if it were there
    codes = code_in(doc, WRONG)

    paths, paths_checked = path_problems(codes)
    commands, commands_checked = command_problems(codes)
    makes, makes_checked = make_problems(codes)
    links, links_checked = link_problems({doc: WRONG})

    assert paths == ["docs/WRONG.md:3: components/no_such_module.py does not exist in the repository"]
    assert paths_checked == 3  # and not tfxp_output/... (ignored by git), OUT/... (a placeholder), m.tflite
    assert commands_checked == 7
    assert sorted(problem.split(": ", 1)[1].split(";")[0].split(" (")[0] for problem in commands) == [
        "`tfxp data` has no command digitz",
        "`tfxp run` has no option --outptu",
        "`tfxp schedule list` has no option --nope",
        "`tfxp schedule pause` has no option --nope",
    ]
    assert (makes, makes_checked) == (
        ["docs/WRONG.md:4: the Makefile has no target tset (it has " + ", ".join(sorted(make_targets())) + ")"],
        3,
    )
    assert links == [
        "docs/WRONG.md:5: the link to no-such-guide.md names no file",
        "docs/WRONG.md:5: WRONG.md has no heading with the anchor #no-such-section",
    ]
    assert links_checked == 4


def test_github_anchors() -> None:
    found = anchors("# A\n## Nightly runs and KFP's cache\n## Running it here: `tfxp run-spec`\n## A\n```\n# no\n```\n")
    assert found == {"a", "nightly-runs-and-kfps-cache", "running-it-here-tfxp-run-spec", "a-1"}
