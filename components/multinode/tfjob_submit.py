"""Creating the TFJob once despite lost answers, and adopting an existing job of its name when it is this task's.

A create whose answer was lost is sent again (CREATE_ATTEMPTS in all). A 409 AlreadyExists adopts the job of that
name when it is this task's: it carries the manifest's owner (the task's pod: the lost answer), or it runs the same
work (a KFP retry of the Trainer task, whose job name comes from the same FnArgs URI). `TfJobClient.submit`
(components/multinode/tfjob_client.py) says the whole rule; `is_this_tasks` is the same test for its clean-up.

Example:
    submitter = TfJobSubmitter(TfJobApi(api, namespace), {}, log=print, pause=time.sleep,
                               raise_if_stopped=lambda: None)
    name = submitter.submit(manifest, manifest["metadata"]["name"])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from components.multinode import tfjob_status as status
from components.multinode.tfjob_api import ApiUnreachableError, JobExistsError, TfJobApi
from components.multinode.tfjob_errors import TfJobConflictError, TfJobError, TfJobGoneError

CREATE_ATTEMPTS = 3


@dataclass(frozen=True)
class TfJobSubmitter:
    """Creates TFJobs in one namespace, or adopts the one of that name that is this task's.

    Attributes:
        api: the API calls, in the namespace where the jobs are (`api.namespace`).
        uids: the uid of each job by name, shared with the client: the created or adopted job's is recorded here.
        log: where progress lines go.
        pause: waits before a create is sent again (the client's: it ends at once, raising, on a stop signal).
        raise_if_stopped: raises StopRequested when the client received a stop signal; called before each create.
    """

    api: TfJobApi
    uids: dict[str, str]
    _: KW_ONLY
    log: Callable[[str], None]
    pause: Callable[[float], None]
    raise_if_stopped: Callable[[], None]

    @property
    def namespace(self) -> str:
        """Where the jobs are: the API's namespace."""
        return self.api.namespace

    def submit(self, manifest: Mapping[str, Any], name: str) -> str:
        """Creates the TFJob `name` from `manifest`, or adopts the existing one; returns `name` (what it raises:
        `TfJobClient.submit`)."""
        troubles = 0
        replaced_failed = False  # an earlier attempt's failed job is replaced once at most
        while True:
            self.raise_if_stopped()  # a create is waited for once sent: do not send one after a stop
            try:
                try:
                    created = self.api.create(manifest)
                except JobExistsError:
                    existing = self.api.get(name)
                    if self._adopt(manifest, name, existing, may_replace=not replaced_failed):
                        return name
                    replaced_failed = True
                    continue
            except (ApiUnreachableError, TfJobGoneError) as trouble:
                # No answer (the job may exist now); or the job of the 409 went away before the GET.
                troubles += 1
                if troubles == CREATE_ATTEMPTS:
                    raise TfJobError(
                        f"could not create TFJob {self.namespace}/{name}: the Kubernetes API did not answer "
                        f"{CREATE_ATTEMPTS} times ({trouble}).",
                        job=f"{self.namespace}/{name}",
                    ) from trouble
                if isinstance(trouble, TfJobGoneError):
                    self.log(f"tfjob {name}: the job of that name went away meanwhile; creating it again")
                else:
                    self.log(f"tfjob {name}: create got no answer ({trouble}); sending it again")
                self.pause(float(troubles))
                continue
            self.uids[name] = str(created["metadata"]["uid"])
            replicas = ", ".join(
                f"{spec.get('replicas', 1)} {kind}" for kind, spec in status.replica_specs(created).items()
            )
            self.log(f"tfjob {name}: created in namespace {self.namespace} ({replicas})")
            return name

    def _adopt(self, manifest: Mapping[str, Any], name: str, existing: Mapping[str, Any], *, may_replace: bool) -> bool:
        """Whether to follow `existing` (True) or create the job anew (False: the failed earlier job is deleted);
        raises TfJobConflictError when it is not this task's."""
        metadata = existing["metadata"]
        deleting = metadata.get("deletionTimestamp")
        owned = _owned_by_manifest_owner(existing, manifest)
        same_work = _runs_same_work(existing, manifest)
        if deleting or not (owned or same_work):
            raise TfJobConflictError(
                f"a TFJob named {name} already exists in namespace {self.namespace} and is not this task's (created "
                f"{metadata.get('creationTimestamp', '?')}, owned by {_owners(existing)}, running "
                f"{_work(existing)}{'; it is being deleted' if deleting else ''}). If it is left over from an earlier "
                f"run, delete it (`kubectl -n {self.namespace} delete tfjob {name}`) and retry the run; if another run "
                "uses it, let that run finish first.",
                job=f"{self.namespace}/{name}",
            )
        uid = str(metadata["uid"])
        if owned:
            self.uids[name] = uid
            self.log(f"tfjob {name}: already exists and belongs to this task ({_owners(existing)}); following it")
            return True
        current = status.state(existing)
        earlier = (
            f"created {metadata.get('creationTimestamp', '?')} by an earlier attempt of this task "
            f"({_owners(existing)}) for the same work ({_work(existing)})"
        )
        if current == "Failed" and may_replace:
            said = str((status.condition(existing, "Failed") or {}).get("message", "")).strip()
            done = {"deleted": "deleted it", "gone": "it is gone already", "replaced": "another job took the name"}
            outcome = done[self.api.delete(name, uid)]
            self.log(
                f"tfjob {name}: already exists, {earlier}, and it Failed ({said or 'no message'}); {outcome}, "
                "creating it anew"
            )
            return False
        self.uids[name] = uid
        self.log(f"tfjob {name}: already exists, {earlier}: {current}; following the earlier attempt's job")
        return True


def _owner_uids(obj: Mapping[str, Any]) -> set[str]:
    return {str(ref.get("uid")) for ref in (obj.get("metadata") or {}).get("ownerReferences") or () if ref.get("uid")}


def _owned_by_manifest_owner(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether `existing` carries one of the manifest's owner references (this task's pod): a manifest without any
    proves nothing, so it adopts nothing."""
    wanted = _owner_uids(manifest)
    return bool(wanted) and bool(wanted & _owner_uids(existing))


def _runs_same_work(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether `existing` runs the manifest's work: its Worker container's arguments (`--fn-args URI`) are the
    manifest's; a manifest without any proves nothing."""
    wanted = status.worker_args(manifest)
    return bool(wanted) and status.worker_args(existing) == wanted


def _work(job: Mapping[str, Any]) -> str:
    """`--fn-args URI` of the job's workers, as a reader looks for it."""
    return " ".join(status.worker_args(job)) or "no worker arguments"


def _owners(obj: Mapping[str, Any]) -> str:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return ", ".join(f"{ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})" for ref in refs) or "nothing"


def is_this_tasks(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether `existing` is the job `manifest` describes, as `TfJobSubmitter` adopts it: it carries the manifest's
    owner, or runs the same work."""
    return _owned_by_manifest_owner(existing, manifest) or _runs_same_work(existing, manifest)
