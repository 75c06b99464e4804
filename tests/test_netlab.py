"""course_utils.netlab: namespaces and links created and always removed, rates kept, workers placed.

The live tests need root and ``ip``/``tc`` (Debian's iproute2). CI runs as root and set-up installs
iproute2, so with ``CI`` set they never skip: there an unusable netlab fails them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course_utils import cluster, netlab
from process_checks import alive, wait_until

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

WHY_NOT = netlab.unavailable()
needs_netns = pytest.mark.skipif(WHY_NOT is not None and not os.environ.get("CI"),
                                 reason=f"network namespaces unavailable: {WHY_NOT}")


@pytest.fixture
def prefix():
    """A prefix no other test (or notebook) uses; whatever is left under it is removed afterwards (each
    test checks what it expects to be left itself)."""
    name = f"t{random.randrange(10**5):05d}"
    yield name
    netlab.remove(name)



def describe_stuck(pid: int) -> str:
    """A process and its children as they are now: status, what the kernel waits on, command line."""
    import psutil

    def one(proc):
        try:
            wchan = Path(f"/proc/{proc.pid}/wchan").read_text().strip()
        except OSError:
            wchan = "?"
        return f"{proc.pid} {proc.status()} wchan={wchan} {' '.join(proc.cmdline())[:120]}"
    try:
        proc = psutil.Process(pid)
        return "; ".join(one(p) for p in [proc, *proc.children(recursive=True)])
    except psutil.Error as error:
        return f"gone ({error})"

# -- without root ---------------------------------------------------------------------------------------

def test_rates_parse_and_describe():
    assert netlab.rate_bits("100mbit") == 1e8 and netlab.rate_bits("1gbit") == 1e9
    assert netlab.rate_bits("1.5Gbit") == 1.5e9 and netlab.rate_bits(" 64kbit") == 64e3
    assert netlab.rate_bits(5e6) == 5e6 and netlab.rate_bits(None) is None
    assert [netlab.describe_rate(r) for r in ("100mbit", "1gbit", "10gbit", None, 500)] == [
        "100 Mbit/s", "1 Gbit/s", "10 Gbit/s", "unlimited", "500 bit/s"]
    for bad in ("fast", "100mb", "0mbit", -1, 0, True, "1 gbit"):
        with pytest.raises(ValueError, match="'100mbit'"):
            netlab.rate_bits(bad)


def test_bad_arguments_are_refused_before_anything_is_created():
    for hosts in (0, 251, 2.0):
        with pytest.raises(ValueError, match="hosts"):
            netlab.Network(hosts)
    for prefix in ("Bad", "much-too-long", "1abc", ""):
        with pytest.raises(ValueError, match="prefix"):
            netlab.Network(2, prefix=prefix)
    with pytest.raises(ValueError, match="rate"):
        netlab.Network(2, rate="quick")


def test_cluster_puts_worker_i_on_host_i_all_on_one_port():
    net = netlab.Network(3, port=2345)  # not created: addresses are known beforehand
    assert net.cluster() == {"worker": ["198.18.0.1:2345", "198.18.0.2:2345", "198.18.0.3:2345"]}
    assert net.cluster(2) == {"worker": ["198.18.0.1:2345", "198.18.0.2:2345"]}
    assert net.task_prefix("worker", 2)[-3:] == ["netns", "exec", f"{netlab.PREFIX}-2"]
    with pytest.raises(ValueError, match="from 1 to 3"):
        net.cluster(4)
    with pytest.raises(ValueError, match="workers only"):
        net.task_prefix("ps", 0)


def test_unavailable_says_why(monkeypatch):
    monkeypatch.setattr(netlab.os, "geteuid", lambda: 1000)
    assert "needs root" in netlab.unavailable()
    monkeypatch.setattr(netlab.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netlab, "_tools", lambda: {"ip": None, "tc": "/usr/sbin/tc"})
    assert "ip not found: install Debian's iproute2" in netlab.unavailable()
    with pytest.raises(netlab.NetlabError, match="Cannot create the network: ip not found"):
        netlab.Network(2).create()


def test_bytes_sent_counts_this_namespaces_interfaces():
    assert isinstance(netlab.bytes_sent(), int) and netlab.bytes_sent() >= 0


# -- live: root and iproute2 ----------------------------------------------------------------------------

@needs_netns
def test_network_is_created_and_removed(prefix):
    assert netlab.existing(prefix) == []
    with netlab.Network(2, rate="1gbit", prefix=prefix) as net:
        assert netlab.existing(prefix) == sorted([f"{prefix}-0", f"{prefix}-1", f"{prefix}-hub"])
        assert len(net.qdiscs()) == 4 and all("rate 1Gbit" in line for line in net.qdiscs())  # both ends
        net.set_rate(None)
        assert not any(" tbf " in line for line in net.qdiscs())
        host_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert "h0" not in host_links.split() and f"{prefix}" not in host_links  # the host's network untouched
    assert netlab.existing(prefix) == []
    net.close()  # twice is fine


@needs_netns
def test_refuses_names_that_exist_and_says_how_to_remove_them(prefix):
    subprocess.run(["ip", "netns", "add", f"{prefix}-1"], check=True)
    with pytest.raises(netlab.NetlabError, match=rf"{prefix}-1 already exist.*netlab.remove\('{prefix}'\)"):
        netlab.Network(2, prefix=prefix).create()
    assert netlab.existing(prefix) == [f"{prefix}-1"]  # nothing of its own created, nothing of others removed
    assert netlab.remove(prefix) == [f"{prefix}-1"]
    assert netlab.existing(prefix) == []


@needs_netns
def test_a_failure_while_creating_removes_what_was_created(prefix, monkeypatch):
    real = netlab.Network._ip

    def fail_on_address(self, *args, netns=None):
        if args[:2] == ("addr", "add") and netns.endswith("-1"):
            raise netlab.NetlabError("simulated failure")
        return real(self, *args, netns=netns)

    monkeypatch.setattr(netlab.Network, "_ip", fail_on_address)
    with pytest.raises(netlab.NetlabError, match="simulated"):
        netlab.Network(2, prefix=prefix).create()
    assert netlab.existing(prefix) == []


@needs_netns
def test_an_error_in_the_block_and_a_failing_worker_leave_nothing(prefix, tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import time\nprint(open('/proc/net/dev').read(), flush=True)\ntime.sleep(0.5)\n"
                      "raise SystemExit(3)\n")
    with pytest.raises(cluster.TaskFailed) as failed:
        with netlab.Network(2, prefix=prefix) as net:
            cluster.run(script, cluster=net.cluster(), prefix=net.task_prefix, show="quiet", log_dir=tmp_path / "logs",
                        fail_grace=5)
    result = failed.value.result
    assert [t.returncode for t in result.tasks] == [3, 3]
    assert "eth0" in result.tasks[0].log_path.read_text()  # it ran inside its host's namespace
    assert not any(alive(t.pid) for t in result.tasks)
    assert netlab.existing(prefix) == []


@needs_netns
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_interrupted_and_killed_owners(prefix, how):
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from course_utils import netlab
        with netlab.Network(2, prefix={prefix!r}, rate="100mbit"):
            print("up", flush=True)
            for _ in range(600):  # longer than any wait below: only the signal ends it. In 1 s steps: a
                time.sleep(1)     # SIGINT handled just before one long sleep began would wait for its end
        """)], stdout=subprocess.PIPE, text=True)
    assert owner.stdout.readline().strip() == "up"
    owner.send_signal(getattr(signal, how))
    try:
        owner.wait(timeout=120)  # a loaded CI machine once took over 30 s here: what was it doing?
    except subprocess.TimeoutExpired:
        state = describe_stuck(owner.pid)
        owner.kill()
        owner.wait()
        pytest.fail(f"the owner was still running 120 s after {how}: {state}")
    if how == "SIGINT":  # KeyboardInterrupt: the with block removes everything
        assert netlab.existing(prefix) == []
    else:  # nothing runs after SIGKILL: the namespaces stay, and the next network refuses until removed
        assert len(netlab.existing(prefix)) == 3
        with pytest.raises(netlab.NetlabError, match="already exist"):
            netlab.Network(2, prefix=prefix).create()
        assert len(netlab.remove(prefix)) == 3 and netlab.existing(prefix) == []


@needs_netns
def test_counters_count_bytes_and_packets_and_offload_is_read(prefix):
    """Notebook 05b's deeper notebook divides bytes by packets: the frame the interface saw."""
    with netlab.Network(2, prefix=prefix) as net:
        before = net.counters()
        net.bandwidth(0, 1, seconds=0.5)
        after = net.counters()
        offload = net.offload(0)
    sent = {key: after[f"{prefix}-0"][key] - before[f"{prefix}-0"][key] for key in ("tx", "tx_packets")}
    assert sent["tx"] > 0 and sent["tx_packets"] > 0 and set(after[f"{prefix}-1"]) == set(before[f"{prefix}-0"])
    assert offload["mtu"] == 1500 and offload["gso_max_size"] >= offload["mtu"]


@needs_netns
@pytest.mark.parametrize("rate", ["100mbit", "1gbit"])
def test_a_limited_link_carries_its_rate(prefix, rate):
    """The limit holds, and below it the link costs nothing. Two Python processes move the bytes, so on a
    busy machine even an unlimited link can be slower than the rate: each limited stream is judged against
    an unlimited one measured right beside it, under the same load (up to three tries)."""
    bits, tries = netlab.rate_bits(rate), []
    with netlab.Network(2, rate=None, prefix=prefix) as net:
        for _ in range(3):
            free = net.bandwidth(0, 1, seconds=1.5) * 8
            net.set_rate(rate)
            limited = net.bandwidth(0, 1, seconds=1.5) * 8
            net.set_rate(None)
            tries.append((limited, free))
            if limited > 0.85 * min(bits, free):
                break
    said = "; ".join(f"{limited / 1e6:.0f} Mbit/s limited, {free / 1e6:.0f} unlimited" for limited, free in tries)
    assert all(limited < 1.15 * bits for limited, _ in tries), f"over the {rate} limit: {said}"
    assert any(limited > 0.85 * min(bits, free) for limited, free in tries), f"short of {rate}: {said}"


@needs_netns
@pytest.mark.notebook
def test_multi_worker_all_reduce_across_namespaces(prefix, tmp_path):
    n = 2_400_000  # about the course CNN's weights
    script = tmp_path / "all_reduce.py"
    script.write_text(textwrap.dedent(f"""
        from course_utils import devices, netlab, worker_exit
        devices.quiet_tensorflow()
        import tensorflow as tf
        ring = tf.distribute.experimental.CommunicationImplementation.RING
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=ring))

        def replica_fn():
            ctx = tf.distribute.get_replica_context()
            return ctx.all_reduce("sum", tf.fill([{n}], tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)))

        before = netlab.bytes_sent()
        total = tf.function(lambda: strategy.run(replica_fn))()
        low, high = float(tf.reduce_min(total)), float(tf.reduce_max(total))
        # A worker can hold the result while its own last bytes still sit in its socket: the barrier
        # of worker_exit passes only once every worker's all-reduce has ended, so the counter is read after it.
        worker_exit.leave_together()
        print("step 1", flush=True)
        print("SUM", low, high, netlab.bytes_sent() - before)
        """))
    with netlab.Network(2, prefix=prefix) as net:
        result = cluster.run(script, cluster=net.cluster(), prefix=net.task_prefix, threads=1, show="quiet",
                             log_dir=tmp_path / "logs", timeout=240)
    for task in result.tasks:
        line = next(line for line in task.log_path.read_text().splitlines() if line.startswith("SUM"))
        low, high, sent = line.split()[1:]
        assert float(low) == float(high) == 3.0  # 1 + 2 everywhere
        # a ring of 2 sends each worker's half twice: the tensor's bytes, plus headers and framing
        assert 4 * n <= int(sent) < 1.2 * 4 * n, f"{int(sent) / 1e6:.2f} MB sent for {4 * n / 1e6:.2f} MB of tensor"
    wait_until(lambda: not any(alive(t.pid) for t in result.tasks), what="workers gone")
