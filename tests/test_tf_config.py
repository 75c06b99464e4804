import json
import re
import socket

import pytest

from course_utils.tf_config import (
    TFConfigError,
    for_task,
    local_cluster,
    port_in_use,
    task_name,
    tasks,
    validate,
)

CLUSTER = {"chief": ["localhost:2220"], "worker": ["localhost:2221", "localhost:2222"], "ps": ["localhost:2223"]}


def config(cluster=None, task_type="worker", index=0) -> dict:
    return {"cluster": CLUSTER if cluster is None else cluster, "task": {"type": task_type, "index": index}}


@pytest.fixture
def listening():
    """A socket listening on a free loopback port, as a leftover worker would."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- tf_config -------------------------------------------------------------------------------------

def test_local_cluster_gives_distinct_free_ports():
    cluster = local_cluster(3, chief=True, ps=2)
    assert list(cluster) == ["chief", "worker", "ps"]
    assert [len(cluster[k]) for k in cluster] == [1, 3, 2]
    addresses = [a for kind in cluster.values() for a in kind]
    ports = [int(a.rpartition(":")[2]) for a in addresses]
    assert all(a.startswith("localhost:") for a in addresses)
    assert len(set(ports)) == 6 and all(0 < p < 65536 for p in ports)
    assert not any(port_in_use("localhost", p) for p in ports)
    assert validate(config(cluster), check_ports=True)["cluster"] is cluster


def test_local_cluster_never_gives_one_port_twice(monkeypatch):
    import random

    picks = iter([15001, 15001, 15002, 15001, 15003])  # a random pick can repeat a free port
    monkeypatch.setattr(random.Random, "choice", lambda self, seq: next(picks))
    assert local_cluster(2, chief=True) == {"chief": ["localhost:15001"],
                                            "worker": ["localhost:15002", "localhost:15003"]}


def test_local_cluster_picks_below_the_ephemeral_range_and_says_when_none_is_free(monkeypatch):
    ports = [int(a.rpartition(":")[2]) for a in local_cluster(8, chief=True, ps=2)["worker"]]
    assert all(15000 <= p < 32768 for p in ports), ports  # an outgoing connection never takes one of these
    import course_utils.tf_config as tf_config

    monkeypatch.setattr(tf_config, "port_in_use", lambda host, port: True)
    with pytest.raises(TFConfigError, match=r"Found only 0 of 2 free ports in 15000-32767 on localhost"):
        local_cluster(2)


def test_local_cluster_counts_and_host():
    assert list(local_cluster()) == ["worker"] and len(local_cluster()["worker"]) == 2
    assert list(local_cluster(0, chief=True)) == ["chief"]
    assert local_cluster(1, host="127.0.0.1")["worker"][0].startswith("127.0.0.1:")
    with pytest.raises(TFConfigError, match="at least one worker or a chief"):
        local_cluster(0)
    with pytest.raises(TFConfigError, match="workers=-1"):
        local_cluster(-1, chief=True)
    with pytest.raises(TFConfigError, match="ps=-1"):
        local_cluster(1, ps=-1)


def test_for_task_and_task_name():
    assert task_name("worker", 1) == "worker 1"
    assert for_task(CLUSTER, "worker", 1) == {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}
    assert for_task(CLUSTER, "evaluator", 0)["task"] == {"type": "evaluator", "index": 0}
    with pytest.raises(TFConfigError, match="worker 2"):
        for_task(CLUSTER, "worker", 2)


def test_tasks_order_chief_workers_ps_evaluator():
    unordered = {"ps": ["h:1"], "worker": ["h:2", "h:3"], "chief": ["h:4"]}
    assert tasks(unordered) == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    assert tasks(unordered, evaluator=True)[-1] == ("evaluator", 0)
    assert len(tasks(unordered, evaluator=True)) == 5
    # An evaluator already in the spec is listed once, in its place.
    assert tasks({"evaluator": ["h:5"], "worker": ["h:6"]}, evaluator=True) == [("worker", 0), ("evaluator", 0)]
    assert tasks({"evaluator": ["h:5"], "worker": ["h:6"]}) == [("worker", 0), ("evaluator", 0)]


def test_validate_accepts_json_text_bytes_and_dicts():
    good = config()
    assert validate(json.dumps(good)) == good
    assert validate(json.dumps(good).encode()) == good
    assert validate(good) is good
    assert validate(config(task_type="ps"))["task"]["type"] == "ps"
    # IPv6 literals: the port is after the last colon.
    assert validate(config({"worker": ["[::1]:2221", "[::1]:2222"]}, index=1))


def test_validate_malformed_json_says_where():
    with pytest.raises(TFConfigError, match=r"not valid JSON \(Expecting .:. delimiter at line 1 column 23\)") as err:
        validate('{"cluster": {"worker" ["localhost:1"]}}')
    assert "It should look like" in str(err.value)
    with pytest.raises(TFConfigError, match=r"not valid JSON .*line 2 column"):
        validate('{"cluster": {},\n "task": }')


@pytest.mark.parametrize("bad", [{}, {"task": {"type": "worker", "index": 0}}, [], "[]",
                                 {"cluster": ["localhost:1"], "task": {"type": "worker", "index": 0}}])
def test_validate_missing_cluster(bad):
    with pytest.raises(TFConfigError, match="needs a 'cluster' object"):
        validate(bad)


@pytest.mark.parametrize("task", [None, "worker 0", {"type": "worker"}, {"index": 0}])
def test_validate_missing_task(task):
    bad = {"cluster": CLUSTER} if task is None else {"cluster": CLUSTER, "task": task}
    with pytest.raises(TFConfigError, match="needs a 'task' object with 'type' and 'index'"):
        validate(bad)


@pytest.mark.parametrize("bad, message", [
    (config({"master": ["localhost:1"]}), "Unknown task type 'master' in the cluster"),
    (config(task_type="master"), "task type 'master' is not one of chief, worker, ps, evaluator"),
    (config({"worker": ["localhost:1"]}, task_type="chief"),
     "This process is chief 0, but the cluster has no 'chief' tasks \\(it has: worker\\)"),
    (config({}, task_type="worker"), "cluster has no 'worker' tasks \\(it has: nothing\\)"),
    (config(index=2), "This process is worker 2, but the cluster lists 2 worker task\\(s\\), indices 0 to 1"),
    (config(task_type="chief", index=1), "chief 1, but the cluster lists 1 chief"),
    (config(index=-1), "task index must be a whole number from 0, got -1"),
    (config(index=True), "got True"),
    (config(index="0"), "got '0'"),
    (config(index=0.0), "got 0.0"),
    (config({"worker": []}), "cluster\\['worker'\\] must be a non-empty list"),
    (config({"worker": "localhost:1"}), "must be a non-empty list of 'host:port' strings, got 'localhost:1'"),
    (config({"chief": ["localhost:1", "localhost:2"], "worker": ["localhost:3"]}),
     "at most one chief, this one lists 2"),
    (config({"evaluator": ["localhost:1", "localhost:2"], "worker": ["localhost:3"]}), "at most one evaluator"),
    (config(task_type="evaluator", index=1), "This process is evaluator 1, but the cluster has no 'evaluator'"),
])
def test_validate_says_what_is_wrong(bad, message):
    with pytest.raises(TFConfigError, match=message):
        validate(bad)
    with pytest.raises(TFConfigError, match=message):  # the same from JSON text
        validate(json.dumps(bad))


@pytest.mark.parametrize("address", ["localhost", "localhost:", ":2222", "localhost:0", "localhost:65536",
                                     "localhost:-1", "localhost:22a", "localhost:2222 ", 2222, None])
def test_validate_malformed_address(address):
    with pytest.raises(TFConfigError, match=rf"worker 1 has address {re.escape(repr(address))}: .*'host:port'"):
        validate(config({"worker": ["localhost:2221", address]}))


def test_validate_duplicate_address_names_both_tasks():
    with pytest.raises(TFConfigError, match="ps 0 and worker 1 share the address localhost:2222") as err:
        validate(config({"worker": ["localhost:2221", "localhost:2222"], "ps": ["localhost:2222"]}))
    assert "own port" in str(err.value)
    with pytest.raises(TFConfigError, match="worker 1 and worker 0 share"):
        validate(config({"worker": ["[::1]:2221", "::1:2221"]}))


def test_validate_duplicate_port_under_two_names_of_this_machine():
    # TensorFlow's gRPC server listens on every interface ("0.0.0.0:port"), so these two collide.
    with pytest.raises(TFConfigError, match="share"):
        validate(config({"worker": ["localhost:2222", "127.0.0.1:2222"]}))


def test_validate_evaluator_outside_the_cluster():
    assert validate(config(task_type="evaluator"))["task"] == {"type": "evaluator", "index": 0}
    inside = {"worker": ["localhost:1"], "evaluator": ["localhost:2"]}
    assert validate(config(inside, task_type="evaluator"))["cluster"] is inside


def test_validate_check_ports(listening):
    busy = {"worker": [f"localhost:{free_port()}", f"localhost:{listening}"]}
    assert validate(config(busy))  # ports are only checked when asked
    with pytest.raises(TFConfigError, match=f"Port {listening} of worker 1 is already in use"):
        validate(config(busy), check_ports=True)
    # The same through another local host name, and for any task, not only this process's.
    with pytest.raises(TFConfigError, match=f"Port {listening} of ps 0"):
        validate(config({"worker": [f"127.0.0.1:{free_port()}"], "ps": [f"127.0.0.1:{listening}"]}),
                 check_ports=True)
    # A port on another machine is not this machine's business.
    assert validate(config({"worker": [f"example.invalid:{listening}"]}), check_ports=True)


def test_port_in_use(listening):
    assert port_in_use("localhost", listening)
    assert port_in_use("127.0.0.1", listening)
    assert not port_in_use("localhost", free_port())

