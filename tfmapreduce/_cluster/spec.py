"""Cluster specs: every accepted form becomes one validated ``{job: [address, ...]}`` dict."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs

from .._base.errors import ClusterError

CLIENT_JOB = "client"
"""The job name of the client's own task in a cluster spec (for ``client_master=True``): never a worker, never given shards."""

_JOB = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # TensorFlow aborts (C++ check failure) on any other job name
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


def split_address(address: object, *, where: str) -> tuple[str, int]:
    """Split ``host:port`` into its parts, or raise a ClusterError naming ``where``.

    Example:
        >>> split_address("localhost:2222", where="job 'local' task 0")
        ('localhost', 2222)
    """
    if not isinstance(address, str) or ":" not in address:
        raise ClusterError(f"{where}: expected an address 'host:port' such as 'localhost:2222', got {address!r}")
    host, _, port_text = address.rpartition(":")
    if not _HOST.match(host):
        raise ClusterError(f"{where}: {address!r} has no valid host name before the port")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ClusterError(f"{where}: {address!r} has port {port_text!r}; expected an integer from 1 to 65535")
    return host, int(port_text)


def load_spec(spec: Any) -> Any:
    """Read a spec given as a JSON string or the path of a JSON file; pass anything else through."""
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and not spec.lstrip().startswith(("{", "["))):
        path = os.fspath(spec)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ClusterError(f"cluster spec file {path!r} cannot be read: {e.strerror}") from None
    elif isinstance(spec, str):
        text, path = spec, None
    else:
        return spec
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        source = f"file {path!r}" if path else "JSON string"
        raise ClusterError(
            f"cluster spec {source} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            'expected e.g. {"local": ["localhost:2222", "localhost:2223"]}'
        ) from None


def validate_spec(spec: Any) -> dict[str, list[str]]:
    """Return ``spec`` as a plain ``{job: [address, ...]}`` dict, or raise one ClusterError listing every problem.

    Example:
        >>> validate_spec({"local": ["localhost:2222", "localhost:2223"]})
        {'local': ['localhost:2222', 'localhost:2223']}
    """
    spec = load_spec(spec)
    if hasattr(spec, "as_dict") and not isinstance(spec, Mapping):  # a tf.train.ClusterSpec
        spec = spec.as_dict()
    if not isinstance(spec, Mapping) or not spec:
        raise ClusterError(
            "cluster spec must be a non-empty mapping from a job name to a list of 'host:port' addresses, "
            f'e.g. {{"local": ["localhost:2222", "localhost:2223"]}}; got {spec!r}'
        )
    problems: list[str] = []
    result: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for job, addresses in spec.items():
        if not isinstance(job, str) or not _JOB.match(job):
            problems.append(
                f"job name {job!r} must start with a letter and hold only letters, digits and '_' (TensorFlow's rule)"
            )
            continue
        if isinstance(addresses, Mapping):  # TensorFlow's sparse form {task index: address}
            if not all(isinstance(k, int) for k in addresses) or sorted(addresses) != list(range(len(addresses))):
                problems.append(f"job {job!r}: a task mapping must have the indices 0..n-1, got {sorted(addresses)!r}")
                continue
            addresses = [addresses[i] for i in range(len(addresses))]
        if isinstance(addresses, str) or not isinstance(addresses, (list, tuple)) or not addresses:
            problems.append(f"job {job!r} must list at least one 'host:port' address, got {addresses!r}")
            continue
        for i, address in enumerate(addresses):
            where = f"job {job!r} task {i}"
            try:
                split_address(address, where=where)
            except ClusterError as e:
                problems.append(str(e))
                continue
            if address in seen:
                problems.append(f"{where}: address {address!r} is also used by {seen[address]}; each task needs its own port")
            seen[address] = where
        result[job] = list(addresses)
    if len(problems) == 1:  # one problem, one line (the worker CLI prints it as its one error line)
        raise ClusterError(f"invalid cluster spec: {problems[0]}")
    if problems:
        raise ClusterError("invalid cluster spec:\n  " + "\n  ".join(problems))
    return result


def task_address(spec: Mapping[str, list[str]], job: str, task: int) -> str:
    """The address of ``/job:JOB/task:TASK``, or a ClusterError saying what the spec has."""
    if job not in spec:
        raise ClusterError(f"job {job!r} is not in the cluster spec; its jobs are {sorted(spec)}")
    if not 0 <= task < len(spec[job]):
        raise ClusterError(f"task {task} is out of range for job {job!r}, which has tasks 0..{len(spec[job]) - 1}")
    return spec[job][task]


@attrs.frozen
class TfConfig:
    """The parts of the ``TF_CONFIG`` environment variable tfmapreduce uses."""

    cluster: dict[str, list[str]]
    """The validated ``cluster`` entry."""
    job: str | None
    """``task.type``, if given."""
    index: int | None
    """``task.index``, if given."""


def load_tf_config(environ: Mapping[str, str] = os.environ, *, unset: str = "") -> TfConfig:
    """Parse ``TF_CONFIG`` (``{"cluster": {...}, "task": {"type": ..., "index": ...}}``) once, for the CLI and ``Cluster``.

    ``unset`` is what to do about an unset ``TF_CONFIG``, appended to the error.

    Raises:
        ClusterError: ``TF_CONFIG`` is unset, not JSON, has no valid ``cluster``, or a malformed ``task``.

    Example:
        >>> load_tf_config({"TF_CONFIG": '{"cluster": {"local": ["localhost:2222"]}, "task": {"type": "local", "index": 0}}'})
        TfConfig(cluster={'local': ['localhost:2222']}, job='local', index=0)
    """
    text = environ.get("TF_CONFIG")
    if not text:
        raise ClusterError(
            "TF_CONFIG is not set; "
            + (unset or 'set it to e.g. {"cluster": {"local": ["localhost:2222"]}, "task": {"type": "local", "index": 0}}')
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ClusterError(f"TF_CONFIG is not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(config, dict) or "cluster" not in config:
        got = sorted(config) if isinstance(config, dict) else config
        raise ClusterError(f"TF_CONFIG has no 'cluster' entry; got {'keys ' if isinstance(config, dict) else ''}{got!r}")
    task = config.get("task", {})
    if not isinstance(task, dict):
        raise ClusterError(f'TF_CONFIG\'s \'task\' must be a mapping such as {{"type": "local", "index": 0}}, got {task!r}')
    job, index = task.get("type"), task.get("index")
    if job is not None and not isinstance(job, str):
        raise ClusterError(f"TF_CONFIG's task type must be a job name (a string), got {job!r}")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise ClusterError(f"TF_CONFIG's task index must be an int, got {index!r}")
    return TfConfig(validate_spec(config["cluster"]), job, index)
