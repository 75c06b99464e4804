"""course_utils.network_diagrams (re-exported by course_utils.diagrams): notebook 05b's network drawn, every label
shown, no text on text, inside the figure."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_diagrams import outside_figure, overlapping_texts, shown_texts, strings  # noqa: E402

from course_utils import diagrams  # noqa: E402

VARIANTS = [{}, {"hosts": 1}, {"hosts": 3, "rate": "10 Gbit/s"}, {"hosts": 4}, {"hosts": 4, "rate": None},
            {"hosts": 2, "rate": "1 Gbit/s", "prefix": "t12345", "port": 65535}]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("kwargs", VARIANTS, ids=lambda v: str(v or "defaults"))
def test_readable_no_overlap_and_renders_to_png(kwargs):
    fig = diagrams.network_links(**kwargs)
    assert overlapping_texts(fig) == []
    assert outside_figure(fig) == []
    assert min(t.get_fontsize() for t in shown_texts(fig)) >= 9
    assert fig.get_size_inches()[0] <= 8 and fig.get_size_inches()[1] <= 3.3 and fig._suptitle.get_text()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG") and len(png.getvalue()) > 10_000


def test_the_lessons_network_every_part_labelled():
    fig = diagrams.network_links()  # notebook 05b's: 2 hosts, 100 Mbit/s, netlab's names and addresses
    texts = strings(fig)
    for label in ("dtc-hub", "dtc-0: host 0's namespace", "dtc-1: host 1's namespace",
                  "worker 0: 198.18.0.1:2222", "worker 1: 198.18.0.2:2222", "eth0 198.18.0.1", "eth0 198.18.0.2",
                  "h0", "h1", "br0: a bridge (a virtual switch) joining every link"):
        assert label in texts, label
    assert texts.count("veth pair") == 2
    assert texts.count("tbf 100 Mbit/s") == 4  # both ends of both links
    assert any("tc qdisc … tbf rate 100 Mbit/s" in t and "198.18.0.0/15" in t for t in texts)
    assert fig._suptitle.get_text() == "2 hosts on one machine: namespaces, veth pairs, a bridge, links of 100 Mbit/s"


def test_netlabs_own_names_and_addresses_are_the_defaults():
    from course_utils import netlab

    net = netlab.Network(2)  # not created
    texts = strings(diagrams.network_links())
    assert f"{net.hub}" in texts and f"worker 1: {net.cluster()['worker'][1]}" in texts


def test_no_limit_draws_no_filter_and_says_so():
    texts = strings(diagrams.network_links(3, rate=None))
    assert not [t for t in texts if "tbf" in t and "No rate limit" not in t]
    assert any("No rate limit" in t for t in texts) and texts.count("veth pair") == 3


def test_many_hosts_keep_a_short_label_in_every_box():
    texts = strings(diagrams.network_links(4))
    assert all(f"h{i}" in texts and any(t.startswith(f"worker {i}") for t in texts) for i in range(4))
    assert sum(t.startswith("eth0") for t in texts) == 4 and sum(t.startswith("tbf") for t in texts) == 8


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"hosts": 0}, "hosts must be an integer from 1 to 4"), ({"hosts": 5}, "hosts must be an integer from 1 to 4"),
    ({"port": 0}, "port must be an integer from 1 to 65535")])
def test_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.network_links(**kwargs)
