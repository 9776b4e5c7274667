"""A program's graph makes each distinct constant once per device and control dependencies (``ConstGraph``), and what
runs is what ran with a constant per use."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._engine.cache import programs
from tfmapreduce._engine.consts import LARGEST, ConstGraph

CPU0, CPU1 = "/job:localhost/replica:0/task:0/device:CPU:0", "/device:CPU:0"


def _consts(graph: tf.Graph) -> list[tf.Operation]:
    return [op for op in graph.get_operations() if op.type == "Const"]


def test_equal_constants_share_an_op_only_where_device_and_control_dependencies_agree() -> None:
    graph = ConstGraph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        with tf.device(CPU0):
            a, b = x * 3.0, x * 3.0  # one 3.0
            c = x * 8.0  # a value of its own
        with tf.device(CPU1):
            d = x * 3.0  # another device scope: its own 3.0
        counter = tf.Variable(0, name="counter")
        with tf.device(CPU0), tf.control_dependencies([counter.assign_add(1)]):
            token = tf.constant(3.0)  # waits for the increment: not the 3.0 above
            again = tf.constant(3.0)  # the same wait: the same op
    assert a.op.inputs[1].op is b.op.inputs[1].op
    assert d.op.inputs[1].op is not a.op.inputs[1].op
    assert token.op is again.op
    assert token.op is not a.op.inputs[1].op
    assert [op.name for op in token.op.control_inputs] == ["AssignAddVariableOp"]
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(counter.initializer)
        got = session.run([a, b, c, d, token], {x: [1.0, 2.0]})
        assert [v.tolist() for v in got[:4]] == [[3.0, 6.0], [3.0, 6.0], [8.0, 16.0], [3.0, 6.0]]
        assert got[4] == 3.0
        assert session.run(counter.read_value()) == 1  # fetching the token ran what it waits for


def test_a_keyed_program_holds_no_two_equal_constants_on_one_device_with_the_same_waits(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(1000) % 7
    values = np.linspace(0.0, 1.0, 1000)
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.mean, by_key=True)  # a job of its own: its programs alone
    got = job.run((keys, values), cluster=cluster, sizes=[300, 700], reducers=2)
    assert dict(got.items()) == pytest.approx({k: values[keys == k].mean() for k in range(7)}, rel=1e-12)
    (program,) = programs(cluster).of(job.identity)
    assert isinstance(program.graph, ConstGraph)
    consts = _consts(program.graph)
    protos = [op.node_def.attr["value"].SerializeToString() for op in consts]
    seen = Counter((v, op.device, tuple(op.control_inputs)) for v, op in zip(protos, consts, strict=True) if len(v) <= LARGEST)
    assert max(seen.values()) == 1
