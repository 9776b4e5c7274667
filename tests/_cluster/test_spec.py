"""Cluster specs: every accepted form, and errors that name the offending entry."""

from __future__ import annotations

import json
import re

import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import tfmapreduce
from tfmapreduce import Cluster, ClusterError
from tfmapreduce._cluster.spec import validate_spec

LESSON = {"local": ["localhost:2222", "localhost:2223"]}


def error_of(spec: object) -> str:
    with pytest.raises(ClusterError) as info:
        Cluster.from_spec(spec)
    return str(info.value)


# --- accepted forms -------------------------------------------------------------------------------


def test_dict_spec_describes_the_lesson_cluster_without_connecting() -> None:
    cluster = Cluster.from_spec(LESSON)
    assert cluster.spec == LESSON
    assert cluster.jobs == ("local",)
    assert tuple(map(str, cluster.tasks)) == ("/job:local/task:0", "/job:local/task:1")
    assert cluster.address("/job:local/task:1") == "localhost:2223"
    assert cluster.target == "grpc://localhost:2222"


def test_spec_property_is_a_copy() -> None:
    cluster = Cluster.from_spec(LESSON)
    cluster.spec["local"].append("localhost:9999")
    assert cluster.spec == LESSON


def test_json_string() -> None:
    assert Cluster.from_spec(json.dumps(LESSON)).spec == LESSON
    assert Cluster.from_spec("  \n" + json.dumps(LESSON)).spec == LESSON


def test_json_file_path_as_str_and_pathlike(tmp_path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(LESSON), encoding="utf-8")
    assert Cluster.from_spec(str(path)).spec == LESSON
    assert Cluster.from_spec(path).spec == LESSON


def test_tf_cluster_spec() -> None:
    spec = {"worker": ["host-a:2222", "host-b:2222"], "ps": ["host-c:2222"]}
    assert Cluster.from_spec(tf.train.ClusterSpec(spec)).spec == spec


def test_sparse_task_mapping_with_all_indices() -> None:
    assert Cluster.from_spec({"local": {1: "localhost:2223", 0: "localhost:2222"}}).spec == LESSON


def test_ipv6_and_dotted_hosts() -> None:
    spec = {"local": ["[::1]:2222", "10.0.0.7:2222", "node-1.example.org:2222"]}
    assert validate_spec(spec) == spec


def test_job_names_with_capitals_digits_and_underscores() -> None:
    spec = {"Map_Reduce2": ["localhost:2222"]}
    assert validate_spec(spec) == spec


def test_tf_config(monkeypatch) -> None:
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": {"mapreduce": LESSON["local"]}, "task": {"type": "mapreduce", "index": 0}})
    )
    assert Cluster.from_tf_config().spec == {"mapreduce": LESSON["local"]}


def test_resolver(monkeypatch) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"mapreduce": LESSON["local"]}}))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert Cluster.from_resolver(resolver).spec == {"mapreduce": LESSON["local"]}


# --- errors that name the entry -------------------------------------------------------------------


def test_errors_are_cluster_errors_and_runtime_errors() -> None:
    with pytest.raises(ClusterError) as info:
        Cluster.from_spec({})
    assert isinstance(info.value, tfmapreduce.TfMapReduceError)
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("spec", [{}, None, [], "[]", ["localhost:2222"], '["localhost:2222"]'])
def test_empty_or_not_a_mapping(spec: object) -> None:
    message = error_of(spec)
    assert "non-empty mapping from a job name" in message
    assert "got" in message


@pytest.mark.parametrize("addresses", [[], (), {}, "localhost:2222", None])
def test_job_without_addresses(addresses: object) -> None:
    message = error_of({"local": ["localhost:2222"], "empty": addresses})
    assert "'empty'" in message
    assert "at least one" in message
    assert "'local'" not in message


@pytest.mark.parametrize("job", ["1local", "", "local job", "map-reduce", "job/0", "_local", "lo:cal"])
def test_bad_job_name(job: str) -> None:
    message = error_of({job: ["localhost:2222"]})
    assert repr(job) in message
    assert "job name" in message


@pytest.mark.parametrize(
    "address",
    [
        "localhost",
        "localhost:",
        ":2222",
        "local host:2222",
        "localhost:http",
        "localhost:22.5",
        "localhost:-1",
        "host_name:2222",
        2222,
        None,
    ],
)
def test_bad_address(address: object) -> None:
    message = error_of({"local": ["localhost:2300", address]})
    assert "job 'local' task 1" in message
    assert repr(address) in message
    assert "2300" not in message  # the good entry is not blamed
    assert "task 0" not in message


@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_port_out_of_range(port: int) -> None:
    address = f"localhost:{port}"
    message = error_of({"local": [address]})
    assert "job 'local' task 0" in message
    assert repr(address) in message
    assert "1 to 65535" in message


def test_duplicate_address_names_both_tasks() -> None:
    message = error_of({"first": ["localhost:2222"], "second": ["localhost:2223", "localhost:2222"]})
    assert "job 'second' task 1" in message
    assert "job 'first' task 0" in message
    assert "'localhost:2222'" in message
    assert "localhost:2223" not in message


def test_every_problem_is_listed_once() -> None:
    message = error_of({"local": ["localhost", "localhost:0"], "9bad": ["localhost:1"], "empty": []})
    for part in ("'localhost'", "'localhost:0'", "'9bad'", "'empty'"):
        assert message.count(part) == 1, (part, message)


def test_sparse_task_mapping_with_a_gap() -> None:
    message = error_of(tf.train.ClusterSpec({"local": {0: "localhost:2222", 2: "localhost:2224"}}))
    assert "'local'" in message
    assert "[0, 2]" in message


def test_json_string_that_is_not_json() -> None:
    message = error_of('{"local": ["localhost:2222",')
    assert "not valid JSON" in message
    assert "line 1" in message


def test_json_file_that_is_not_json(tmp_path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text("local: [localhost:2222]", encoding="utf-8")
    message = error_of(str(path))
    assert repr(str(path)) in message
    assert "not valid JSON" in message


def test_missing_json_file(tmp_path) -> None:
    path = tmp_path / "missing.json"
    message = error_of(path)
    assert repr(str(path)) in message
    assert "cannot be read" in message


def test_json_file_with_a_bad_entry(tmp_path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"local": ["localhost:2222", "localhost:70000"]}), encoding="utf-8")
    message = error_of(path)
    assert "job 'local' task 1" in message
    assert "'localhost:70000'" in message


def test_tf_config_unset(monkeypatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ClusterError, match="TF_CONFIG is not set"):
        Cluster.from_tf_config()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{not json", "TF_CONFIG is not valid JSON"),
        ('{"task": {"type": "local", "index": 0}}', "no 'cluster' entry"),
        ('["localhost:2222"]', "no 'cluster' entry"),
        ('{"cluster": {"local": ["localhost:2222", "localhost:2222"]}}', "job 'local' task 1"),
    ],
)
def test_bad_tf_config(monkeypatch, value: str, expected: str) -> None:
    monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(ClusterError, match=re.escape(expected)):
        Cluster.from_tf_config()


class _BrokenResolver:
    """A stand-in for a resolver used outside its environment (e.g. Slurm outside a step)."""

    def cluster_spec(self) -> tf.train.ClusterSpec:
        raise RuntimeError("SLURM_PROCID not found in environment")


def test_resolver_that_cannot_resolve() -> None:
    with pytest.raises(ClusterError, match=r"_BrokenResolver cannot resolve a cluster here: SLURM_PROCID"):
        Cluster.from_resolver(_BrokenResolver())


# --- properties -----------------------------------------------------------------------------------

job_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True)
hosts = st.sampled_from(["localhost", "127.0.0.1", "node-1", "[::1]", "worker.example.org"])


@st.composite
def specs(draw: st.DrawFn) -> dict[str, list[str]]:
    jobs = draw(st.lists(job_names, min_size=1, max_size=4, unique=True))
    sizes = [draw(st.integers(1, 4)) for _ in jobs]
    ports = draw(st.lists(st.integers(1, 65535), min_size=sum(sizes), max_size=sum(sizes), unique=True))
    host = draw(hosts)
    it = iter(ports)
    return {job: [f"{host}:{next(it)}" for _ in range(n)] for job, n in zip(jobs, sizes, strict=True)}


@given(specs())
def test_every_valid_spec_comes_back_unchanged_in_every_form(spec: dict[str, list[str]]) -> None:
    assert validate_spec(spec) == spec
    assert validate_spec(json.dumps(spec)) == spec
    assert validate_spec(tf.train.ClusterSpec(spec)) == spec
    assert tuple(map(str, Cluster.from_spec(spec).tasks)) == tuple(
        f"/job:{j}/task:{i}" for j, a in spec.items() for i in range(len(a))
    )


@given(specs(), st.data())
def test_a_bad_port_anywhere_is_named(spec: dict[str, list[str]], data: st.DataObject) -> None:
    job = data.draw(st.sampled_from(sorted(spec)))
    task = data.draw(st.integers(0, len(spec[job]) - 1))
    port = data.draw(st.one_of(st.integers(max_value=0), st.integers(min_value=65536)))
    host = spec[job][task].rpartition(":")[0]
    bad = {j: list(a) for j, a in spec.items()}
    bad[job][task] = f"{host}:{port}"
    message = error_of(bad)
    assert f"job {job!r} task {task}: {bad[job][task]!r}" in message
