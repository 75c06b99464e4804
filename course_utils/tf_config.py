"""``TF_CONFIG`` for a cluster on one machine: build one on free loopback ports, and check any you are given.

``TF_CONFIG`` is the JSON that tells each process of a multi-worker job who is in the cluster and
which task it is itself::

    {"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
     "task": {"type": "worker", "index": 0}}

:func:`local_cluster` picks free ports below the ephemeral range, :func:`for_task` gives one task's
``TF_CONFIG``, and :func:`validate` turns every mistake TensorFlow would report late, or not at all,
into a :class:`TFConfigError` that says what is wrong and how to fix it.
"""

from __future__ import annotations

import json
import random
import socket

TASK_TYPES = ("chief", "worker", "ps", "evaluator")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")
# Where local_cluster picks ports: below Linux's ephemeral range (32768-60999; macOS and Windows start theirs at 49152).
# A free port in that range can become another process's outgoing connection's source port before the task's
# server binds it: "Could not start gRPC server" (seen in CI, a port picked by portpicker, which asks the OS).
FREE_PORTS = range(15000, 32768)
EXAMPLE = '{"cluster": {"worker": ["localhost:12345", "localhost:12346"]}, "task": {"type": "worker", "index": 0}}'


class TFConfigError(ValueError):
    """A ``TF_CONFIG`` that TensorFlow could not use: the message says what to change."""


def task_name(task_type: str, index: int) -> str:
    """``"worker 0"``: how the course names a task in messages and output prefixes."""
    return f"{task_type} {index}"


def local_cluster(workers: int = 2, *, chief: bool = False, ps: int = 0, host: str = "localhost") -> dict:
    """A cluster spec with ``workers`` workers (and an optional chief and ``ps`` parameter servers),
    each on its own free port of ``host``. An evaluator, if you run one, stays out of the cluster spec
    (nobody connects to it): give it ``for_task(cluster, "evaluator", 0)``."""
    if workers < 0 or ps < 0 or (workers == 0 and not chief):
        raise TFConfigError(f"A cluster needs at least one worker or a chief (got workers={workers}, ps={ps}).")
    counts = {"chief": int(chief), "worker": workers, "ps": ps}
    needed, rng, ports = sum(counts.values()), random.Random(), []
    for _ in range(100 * needed):
        if len(ports) == needed:
            break
        port = rng.choice(FREE_PORTS)
        if port not in ports and not port_in_use(host, port):
            ports.append(port)
    if len(ports) < needed:
        span = f"{FREE_PORTS.start}-{FREE_PORTS.stop - 1}"
        raise TFConfigError(f"Found only {len(ports)} of {needed} free ports in {span} on {host}: "
                            "stop what holds them.")
    free = iter(ports)
    return {kind: [f"{host}:{next(free)}" for _ in range(n)] for kind, n in counts.items() if n}


def for_task(cluster: dict, task_type: str, index: int) -> dict:
    """The ``TF_CONFIG`` of one task of ``cluster``, checked (:func:`validate`)."""
    return validate({"cluster": cluster, "task": {"type": task_type, "index": index}})


def tasks(cluster: dict, *, evaluator: bool = False) -> list[tuple[str, int]]:
    """Every task of ``cluster`` as ``(type, index)``, chief first, then workers, ps, evaluator."""
    found = [(kind, i) for kind in TASK_TYPES for i in range(len(cluster.get(kind, [])))]
    return found + ([("evaluator", 0)] if evaluator and "evaluator" not in cluster else [])


def port_in_use(host: str, port: int) -> bool:
    """True if something on this machine listens on ``port`` (a bind with SO_REUSEADDR fails, as
    TensorFlow's gRPC server's would)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", port))
        except OSError:
            return True
    return False


def _parse(tf_config) -> dict:
    if isinstance(tf_config, (bytes, str)):
        try:
            tf_config = json.loads(tf_config)
        except json.JSONDecodeError as err:
            raise TFConfigError(f"TF_CONFIG is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}). "
                                f"It should look like: {EXAMPLE}") from None
    if not isinstance(tf_config, dict) or not isinstance(tf_config.get("cluster"), dict):
        raise TFConfigError(f"TF_CONFIG needs a 'cluster' object mapping task types to address lists, like: {EXAMPLE}")
    task = tf_config.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise TFConfigError("TF_CONFIG needs a 'task' object with 'type' and 'index', such as "
                            "{'type': 'worker', 'index': 0}: it says which task of the cluster this process is.")
    return tf_config


def _split_address(kind: str, i: int, address) -> tuple[str, int]:
    host, sep, port = str(address).rpartition(":")
    if not (isinstance(address, str) and sep and host and port.isdigit() and 0 < int(port) < 65536):
        raise TFConfigError(f"{task_name(kind, i)} has address {address!r}: write it as 'host:port' with a port "
                            "from 1 to 65535, for example 'localhost:12345'.")
    return host.strip("[]"), int(port)


def validate(tf_config, *, check_ports: bool = False) -> dict:
    """Check a ``TF_CONFIG`` (a JSON string or a dict) and return it as a dict.

    Raises :class:`TFConfigError` for malformed JSON, a missing ``cluster`` or ``task``, an unknown task
    type, a task type or index that is not in the cluster, a malformed or duplicate address, and, with
    ``check_ports=True``, a port on this machine that another process already listens on.
    """
    config = _parse(tf_config)
    cluster, task = config["cluster"], config["task"]
    seen: dict[tuple[str, int], str] = {}
    for kind, addresses in cluster.items():
        if kind not in TASK_TYPES:
            raise TFConfigError(f"Unknown task type {kind!r} in the cluster: use {', '.join(TASK_TYPES)}.")
        if not isinstance(addresses, list) or not addresses:
            raise TFConfigError(f"cluster[{kind!r}] must be a non-empty list of 'host:port' strings, "
                                f"got {addresses!r}.")
        if kind in ("chief", "evaluator") and len(addresses) > 1:
            raise TFConfigError(f"A cluster has at most one {kind}, this one lists {len(addresses)}.")
        for i, address in enumerate(addresses):
            host, port = _split_address(kind, i, address)
            where = ("localhost" if host in LOCAL_HOSTS else host, port)  # its server listens on every interface
            if where in seen:
                raise TFConfigError(f"{task_name(kind, i)} and {seen[where]} share the address {address}: "
                                    "every task needs its own port (tf_config.local_cluster() picks free ones).")
            seen[where] = task_name(kind, i)
    kind, index = task["type"], task["index"]
    if kind not in TASK_TYPES:
        raise TFConfigError(f"task type {kind!r} is not one of {', '.join(TASK_TYPES)}.")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise TFConfigError(f"task index must be a whole number from 0, got {index!r}.")
    if kind not in cluster and not (kind == "evaluator" and index == 0):
        raise TFConfigError(f"This process is {task_name(kind, index)}, but the cluster has no {kind!r} tasks "
                            f"(it has: {', '.join(cluster) or 'nothing'}). "
                            f"Fix task.type or add {kind!r} to the cluster.")
    if kind in cluster and index >= len(cluster[kind]):
        raise TFConfigError(f"This process is {task_name(kind, index)}, but the cluster lists {len(cluster[kind])} "
                            f"{kind} task(s), indices 0 to {len(cluster[kind]) - 1}.")
    if check_ports:
        for (host, port), name in seen.items():
            if host in LOCAL_HOSTS and port_in_use(host, port):
                raise TFConfigError(f"Port {port} of {name} is already in use on this machine: another process "
                                    "listens there (a worker left over from an earlier run?). Stop it, or pick "
                                    "free ports with tf_config.local_cluster().")
    return config
