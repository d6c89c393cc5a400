"""Where a path may point (under its base, on a folder, never onto an input) and which folders tfxp may remove.

One rule for each question a path raises, `..` resolved before any check:

- **Under a base** (`check_relative`): a path or glob relative to a folder (`data.train_pattern` under
  `data.path`) is relative, has no scheme, and stays under the folder once its `..` parts are resolved
  (`span-*/../../x` does not).
- **On a folder** (`is_under`): membership by the resolved path, not its text: `/data/../etc` is not on `/data`.
  The paths name a pod's file system (a PVC mount), so `..` is resolved as the pod would, by the text alone.
- **No output onto an input** (`check_not_input`): an output file that resolves (symlinks followed, hard links
  compared) to an input the same command reads, or into an input folder, is refused before anything is written.
- **No output in the data** (`lies_in`, `check_apart_from_data`): a folder a run writes (its output, pipeline
  root, serving base) is not the data folder and does not lie in it, and the data lies in none of them, by the
  resolved path (symlinks followed where they exist here; a bucket path by its text): the next run would read the
  outputs as data.
- **Remove only what tfxp made** (`claim_dir`, `remove_claimed`, `remove_made_file`): a working folder tfxp empties
  holds a marker file; a folder without it that holds anything is the user's, and is refused, never removed. A file
  tfxp removes when it has nothing to say (`deploy-assets`' warnings.txt) begins with the header tfxp wrote it with;
  a file of that name without it is the user's, and is left.
- **Overwrite only what tfxp wrote** (`check_written_by_tfxp`, `record_written`): a command that writes a set of
  files into a folder the user names (`deploy-assets --out`) lists them, with their SHA-256, in `WRITTEN_MANIFEST`
  there. A file in the way that the list does not name with its present content (the user's, or one the user
  edited since) is refused by name before anything is written; a re-run over tfxp's own files replaces them, and
  removes those it wrote before and writes no more (unchanged since).

Only the standard library is imported here.

Example:
    check_relative("train/*.tfrecord", "data.train_pattern", "data.path")  # returns the normalised glob
    is_under("/data/../etc", "/data")  # False
    check_not_input(Path("pipeline.yaml"), {"--config": Path("my.yaml")}, "--out")
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
from collections.abc import Mapping
from pathlib import Path

from foundation.bounded import parse_json, read_file
from foundation.errors import TfxpError
from foundation.paths import is_remote, scheme

CLAIM_MARKER = ".tfxp-made"
"""The file that marks a working folder as tfxp's (written when tfxp makes it; tfxp removes only such folders)."""
WRITTEN_MANIFEST = ".tfxp-written.json"
"""The list of the files tfxp wrote into a user's folder, {"files": {relative path: sha256}} (`record_written`)."""
_MANIFEST_LIMIT = 1 << 20  # bytes; a larger "manifest" is no list tfxp wrote
_WRITTEN_FILE_LIMIT = 16 << 20  # bytes; tfxp's deploy assets are a few KiB, so a larger file is not one tfxp wrote


class PathRuleError(TfxpError, ValueError):
    """A path that breaks one of the rules above (the message names the key or option and the fix)."""


def normalized(path: str) -> str:
    """`path` with `.`, `..` and repeated `/` resolved by the text alone, as the file system that holds it would
    (a leading `//` too, which POSIX would keep): `/data/../etc` → `/etc`, `a/./b/` → `a/b`."""
    text = posixpath.normpath(path)
    return "/" + text.lstrip("/") if text.startswith("/") else text


def relative_problem(path: str) -> str | None:
    """What keeps `path` from being a path under a base folder: absolute, a URI, or leaving the folder once its
    `..` parts are resolved; None when nothing does.

    Example:
        relative_problem("train-*")  # None
        relative_problem("../../etc/*")  # "leaves the folder: it resolves to ../../etc/*"
    """
    if is_remote(path):
        return "is a URI, not a path under the folder"
    if posixpath.isabs(path):
        return "is absolute, not a path under the folder"
    resolved = normalized(path)
    if resolved == ".." or resolved.startswith("../"):
        return f"leaves the folder: it resolves to {resolved}"
    return None


def check_relative(path: str, key: str, base_key: str) -> str:
    """`path` normalised, if it stays under its base (see `relative_problem`).

    Args:
        path: The path or glob as the user wrote it.
        key: Where it was given, e.g. `data.train_pattern`.
        base_key: Where its base is given, e.g. `data.path`.

    Returns:
        `normalized(path)`.

    Raises:
        PathRuleError: names the key, the value and what a valid one looks like.
    """
    problem = relative_problem(path)
    if problem is not None:
        raise PathRuleError(
            f"{key} = {path!r} {problem}; it must name files under {base_key}, e.g. `train/*` (no leading /, "
            f"no URI, no .. that leaves {base_key}); point {base_key} at the folder that holds them instead"
        )
    return normalized(path)


def is_under(path: str, folder: str) -> bool:
    """Whether the local `path` is `folder` or lies under it, both resolved by `normalized` first.

    Example:
        is_under("/data/digits", "/data")  # True
        is_under("/data/../etc", "/data")  # False
        is_under("/database", "/data")  # False
    """
    inside, base = normalized(path), normalized(folder)
    return inside == base or inside.startswith(base.rstrip("/") + "/")


def _same(first: Path, second: Path) -> bool:
    """Whether two local paths name one file: the same resolved path, or (both existing) the same inode."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def check_not_input(output: Path, inputs: Mapping[str, Path | None], option: str) -> Path:
    """`output`, if writing it would overwrite none of `inputs`.

    Args:
        output: The file the command will write.
        inputs: What the command reads, by the option or key that names it (None = not given): a file, or a
            folder, which `output` must not lie in.
        option: The output's option, e.g. `--out`.

    Returns:
        `output`, unchanged.

    Raises:
        PathRuleError: `output` resolves to one of `inputs` (a symlink or a hard link included), or into an
            input folder.
    """
    for name, source in inputs.items():
        if source is None:
            continue
        if _same(output, source):
            raise PathRuleError(
                f"{option} {output} is the file {name} {source} that this command reads: writing it would "
                f"overwrite the input; give {option} another path"
            )
        if source.is_dir() and output.resolve().is_relative_to(source.resolve()):
            raise PathRuleError(
                f"{option} {output} lies in the folder {name} {source} that this command reads: writing it would "
                f"change the input; give {option} a path outside {source}"
            )
    return output


def claim_dir(path: Path, what: str) -> Path:
    """Makes the working folder `path` tfxp's (created with `CLAIM_MARKER` in it), so `remove_claimed` may
    remove it later.

    Args:
        path: The folder.
        what: Where it comes from, for the message, e.g. `--state DIR`'s pod folder.

    Returns:
        `path`.

    Raises:
        PathRuleError: `path` exists, holds something and was not made by tfxp (no marker), or is a file.
    """
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise PathRuleError(
            f"{what} {path} is a file or a link, not a folder tfxp made; tfxp empties that folder after each "
            "task, so move it away or choose another folder"
        )
    if path.is_dir() and not (path / CLAIM_MARKER).is_file() and any(path.iterdir()):
        raise PathRuleError(
            f"{what} {path} holds files tfxp did not write (it has no {CLAIM_MARKER}), and tfxp empties that "
            "folder after each task; move those files out of it, or choose another folder"
        )
    path.mkdir(parents=True, exist_ok=True)
    (path / CLAIM_MARKER).touch()
    return path


def remove_claimed(path: Path) -> bool:
    """Removes the folder `path` and everything in it if tfxp made it (`claim_dir`); leaves anything else.

    Returns:
        Whether it was removed.
    """
    if path.is_symlink() or not (path / CLAIM_MARKER).is_file():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def remove_made_file(path: Path, header: str) -> bool:
    """Removes the file `path` if tfxp wrote it: it begins with `header`, the line tfxp writes such a file with.
    A file of that name without the header (the user's), a link or a folder is left.

    Returns:
        Whether it was removed.
    """
    if path.is_symlink() or not path.is_file():
        return False
    expected = header.encode("utf-8")
    with path.open("rb") as handle:
        if handle.read(len(expected)) != expected:
            return False
    path.unlink()
    return True


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path) -> str | None:
    """The SHA-256 of the file `path`, read in blocks; None for a file larger than anything tfxp writes there."""
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size > _WRITTEN_FILE_LIMIT:
            return None
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _written_files(folder: Path) -> dict[str, str]:
    """What `WRITTEN_MANIFEST` in `folder` lists (relative path → sha256); {} when it is missing or unreadable."""
    path = folder / WRITTEN_MANIFEST
    try:
        if path.is_symlink() or not path.is_file():
            return {}
        data = read_file(path, _MANIFEST_LIMIT, f"tfxp's list of written files {path}", "remove it")
        files = parse_json(data).get("files")
    except (OSError, ValueError, AttributeError):  # missing, unreadable, too large (TooLargeError), not JSON
        return {}
    if not isinstance(files, dict):
        return {}
    return {name: digest for name, digest in files.items() if isinstance(digest, str)}


def check_written_by_tfxp(folder: Path, planned: Mapping[str, str], option: str) -> None:
    """Refuses to write `planned` into `folder` over anything tfxp did not write there.

    A path in the way is tfxp's when it is a plain file that `WRITTEN_MANIFEST` lists with its present SHA-256, or
    that already holds exactly the planned text (writing it changes nothing); a link, a folder, a file that leads
    out of `folder` (through a linked subfolder) or any other file is not.

    Args:
        folder: The folder the command writes into.
        planned: Relative path → the text the command will write there.
        option: The folder's option, e.g. `--out`.

    Raises:
        PathRuleError: naming every path in the way that is not tfxp's, and the two ways out.
    """
    written = _written_files(folder)
    root = folder.resolve()
    foreign = []
    for name, text in planned.items():
        path = folder / name
        if not path.resolve().is_relative_to(root):
            foreign.append(f"{name} (leads out of {folder})")
        elif path.is_symlink() or (path.exists() and not path.is_file()):
            foreign.append(f"{name} (a link or a folder)")
        elif path.exists():
            digest = _file_digest(path)
            if digest is None or digest not in (written.get(name), _digest(text.encode("utf-8"))):
                foreign.append(name)
    manifest = folder / WRITTEN_MANIFEST
    if manifest.is_symlink() or (manifest.exists() and not manifest.is_file()):
        foreign.append(f"{WRITTEN_MANIFEST} (a link or a folder)")
    if foreign:
        raise PathRuleError(
            f"{option} {folder} holds files tfxp did not write (or that were edited since; {WRITTEN_MANIFEST} lists "
            f"what tfxp wrote): {', '.join(foreign)}; tfxp never replaces them: give {option} another folder, or "
            "move those files away"
        )


def record_written(folder: Path, written: Mapping[str, str]) -> list[Path]:
    """Records `written` (relative path → the text tfxp wrote) in `folder`'s `WRITTEN_MANIFEST`, and removes the
    files an earlier run wrote that this one did not, where they are unchanged since (`check_written_by_tfxp`).

    Returns:
        The files removed.
    """
    earlier = _written_files(folder)
    removed = []
    for name, digest in earlier.items():
        path = folder / name
        if name in written or path.is_symlink() or not path.is_file():
            continue
        if not path.resolve().is_relative_to(folder.resolve()) or _file_digest(path) != digest:
            continue
        path.unlink()
        removed.append(path)
    files = {name: _digest(text.encode("utf-8")) for name, text in sorted(written.items())}
    (folder / WRITTEN_MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")
    return removed


def _located(path: str) -> tuple[str, str]:
    """(scheme, path) with `..` and links resolved: a bucket path by its text, a local one by `os.path.realpath`
    (relative to the working folder; the parts that exist here with their links followed)."""
    found = scheme(path)
    if found:
        return found, normalized(path[len(found) + 3 :])
    return "", os.path.realpath(os.path.expanduser(path))


def lies_in(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it, both resolved (`_located`); a bucket path never lies in a
    local folder.

    Example:
        lies_in("/data/digits/train", "/data/digits")  # True
        lies_in("gs://b/x/../data/eval", "gs://b/data")  # True
    """
    (path_scheme, inside), (folder_scheme, base) = _located(path), _located(folder)
    return path_scheme == folder_scheme and is_under(inside, base)


def check_apart_from_data(
    outputs: Mapping[str, str], data: str, data_key: str = "data.path", written: Mapping[str, str] | None = None
) -> None:
    """Refuses outputs that are or lie in the data folder, and a data folder that lies in a folder tfxp fills.

    Args:
        outputs: The folders or files a command writes, by the option or key that names it (`{"--output": OUT}`);
            "" = none.
        data: The data folder the command (or the pipeline it compiles) reads.
        data_key: Its key, for the message.
        written: The folders tfxp fills under the outputs (`OUT/<pipeline>`, the serving base), which must not
            hold the data either (a data folder elsewhere under `OUT` is fine).

    Raises:
        PathRuleError: naming the output, the data folder and what to change.
    """
    if not data:
        return
    for key, output in {**outputs, **(written or {})}.items():
        if output and lies_in(output, data):
            raise PathRuleError(
                f"{key} {output} lies in {data_key} {data}, the data the pipeline reads: the next run would read "
                f"this run's outputs (the report, the summary, the pipeline root) as data; give {key} a folder "
                f"outside {data}"
            )
    for key, output in (written or {}).items():
        if output and lies_in(data, output):
            raise PathRuleError(
                f"{data_key} {data} lies in {key} {output}, which tfxp writes into: the run's outputs would be read "
                f"as data; move the data out of {output}"
            )
