"""Compare-and-swap writes of a model's rollout state, on a local folder or a `gs://` bucket.

Two writers may decide at once (a run's first step and a scheduled `tfxp rollout analyze`); neither may lose the
other's decision. Each store reads the state with a token and writes it only if the token still holds:

- `LocalStore`: an exclusive `fcntl.flock` on `tfxp_rollout/.lock` for the whole read-decide-write, the state
  written to a temporary file and renamed over `state.json` (atomic on one file system).
- `GcsStore`: Cloud Storage's generation preconditions (`if_generation_match`,
  https://cloud.google.com/storage/docs/request-preconditions): the state is written only if its object's
  generation is the one read (0 = it must not exist yet); a decision file is created only if absent. A lost race
  raises `ConcurrentRolloutError`, which `serving.rollout.state.update_rollout` retries from a fresh read.

Other bucket schemes have no precondition tfxp can use, so they are refused with a message.

Example:
    store = open_store("gs://bucket/serving/digits")
    with store.transaction() as transaction:
        text, token = transaction.read(STATE_FILE)
        transaction.write(STATE_FILE, new_text, token)
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from foundation.bounded import MAX_DOCUMENT_BYTES, TooLargeError, read_file
from foundation.errors import TfxpError
from foundation.paths import is_remote, replace_text, scheme, split_bucket, uri
from serving.rollout.layout import rollout_dir

_FIX = (
    "it is tfxp's own file: restore it from a backup, or remove it (tfxp_rollout/state.json: the rollout starts afresh)"
)


class ConcurrentRolloutError(TfxpError, RuntimeError):
    """Another writer changed the rollout state between this writer's read and its write."""


class Transaction(Protocol):
    """Reads and conditional writes inside one `RolloutStore.transaction()`."""

    def read(self, name: str) -> tuple[str | None, Any]:
        """The text of `tfxp_rollout/<name>` (None when absent) and the token its write must present."""

    def write(self, name: str, text: str, token: Any) -> None:
        """Writes `name` if it is unchanged since the read that gave `token` (None = it must not exist)."""

    def list(self, folder: str) -> list[str]:
        """The names of the files in `tfxp_rollout/<folder>/`, sorted."""


class RolloutStore(Protocol):
    """Where one model's rollout files live."""

    location: str

    def transaction(self) -> contextlib.AbstractContextManager[Transaction]:
        """One read-decide-write; writes in it fail if another writer got there first."""


class LocalStore:
    """The rollout files in a local folder, guarded by an exclusive lock on `.lock`."""

    def __init__(self, location: str) -> None:
        self.location = location

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        folder = Path(self.location)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the process dies
            yield _LocalTransaction(folder)


class _LocalTransaction:
    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def read(self, name: str) -> tuple[str | None, Any]:
        path = self._folder / name
        try:
            token = path.stat().st_mtime_ns
            data = read_file(path, MAX_DOCUMENT_BYTES, f"the rollout file {path}", _FIX)
        except FileNotFoundError:
            return None, None
        except OSError as error:  # a FIFO or a folder in its place, or unreadable
            raise TfxpError(f"cannot read the rollout file {path} ({error.strerror or error}); {_FIX}") from None
        return data.decode("utf-8", "replace"), token  # not UTF-8: not JSON either, said where it is parsed

    def write(self, name: str, text: str, token: Any) -> None:
        path = self._folder / name
        if token is None and path.exists():  # the lock makes this the only writer; a present file is a bug
            raise ConcurrentRolloutError(f"{path} exists already; it is never rewritten")
        replace_text(path, text)

    def list(self, folder: str) -> list[str]:
        directory = self._folder / folder
        return (
            sorted(entry.name for entry in directory.iterdir() if not entry.name.startswith("."))
            if directory.is_dir()
            else []
        )


class GcsStore:
    """The rollout files in a Cloud Storage folder, written under generation preconditions."""

    def __init__(self, location: str, client: Any = None) -> None:
        self.location = location
        bucket, self._prefix = split_bucket(location)
        if client is None:
            from google.cloud import storage

            client = storage.Client()
        self._bucket = client.bucket(bucket)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        yield _GcsTransaction(self._bucket, self._prefix.rstrip("/"))


class _GcsTransaction:
    def __init__(self, bucket: Any, prefix: str) -> None:
        self._bucket, self._prefix = bucket, prefix

    def read(self, name: str) -> tuple[str | None, Any]:
        blob = self._bucket.get_blob(f"{self._prefix}/{name}")
        if blob is None:
            return None, 0
        if (getattr(blob, "size", None) or 0) > MAX_DOCUMENT_BYTES:  # set by get_blob (test doubles may lack it)
            raise TooLargeError(
                f"the rollout file {uri('gs', f'{self._bucket.name}/{blob.name}')}", MAX_DOCUMENT_BYTES, _FIX
            )
        return blob.download_as_bytes(if_generation_match=blob.generation).decode("utf-8"), blob.generation

    def write(self, name: str, text: str, token: Any) -> None:
        from google.api_core.exceptions import PreconditionFailed

        blob = self._bucket.blob(f"{self._prefix}/{name}")
        try:
            blob.upload_from_string(text, content_type="application/json", if_generation_match=token or 0)
        except PreconditionFailed as error:
            raise ConcurrentRolloutError(
                f"{uri('gs', f'{self._bucket.name}/{self._prefix}/{name}')} changed since it was read (another rollout "
                "decision landed first)"
            ) from error

    def list(self, folder: str) -> list[str]:
        prefix = f"{self._prefix}/{folder}/"
        return sorted(blob.name[len(prefix) :] for blob in self._bucket.list_blobs(prefix=prefix))


def open_store(model_base: str, client: Any = None) -> RolloutStore:
    """The store of `<model base>/tfxp_rollout`: a local folder, or a `gs://` one.

    Raises:
        TfxpError: another bucket scheme (no write precondition to guard concurrent decisions with).
    """
    location = rollout_dir(model_base)
    if not is_remote(model_base):
        return LocalStore(location)
    if scheme(model_base) == "gs":
        return GcsStore(location, client)
    raise TfxpError(
        f"serving.rollout: canary keeps its state beside the versions, at {location}, and needs a write "
        f"precondition there so two decisions never overwrite each other; {scheme(model_base)}:// has none tfxp "
        "uses (gs:// and local paths do); push to gs:// or a local/mounted path, or set serving.rollout: direct"
    )
