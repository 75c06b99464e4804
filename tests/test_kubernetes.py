"""cluster/kubernetes/mwms-job.yaml, checked without Kubernetes: every pod's start-up script is run with
that pod's index, and the TF_CONFIGs it prints must describe one cluster that the Service and Job create."""

import json
import subprocess
from pathlib import Path

import yaml

from course_utils import tf_config

MANIFEST = Path(__file__).resolve().parent.parent / "cluster" / "kubernetes" / "mwms-job.yaml"


def manifest():
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}
    return docs["Service"], docs["Job"]


def pod_tf_config(job: dict, index: int) -> dict:
    """Run the pod's start-up script as its container would, stopping before it starts the worker."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace("exec python", "exit 0 #")  # everything up to the worker
    env = {e["name"]: e["value"] for e in container["env"]}
    out = subprocess.run(["/bin/sh", "-c", script], env={**env, "JOB_COMPLETION_INDEX": str(index)},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.split("TF_CONFIG=", 1)[1])


def test_every_pod_gets_the_same_cluster_and_its_own_task():
    service, job = manifest()
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    workers = spec["completions"]
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == workers == int(env["WORKERS"])
    name, port = job["metadata"]["name"], service["spec"]["ports"][0]["port"]
    # Pods of an Indexed Job are named <job>-<index>; with subdomain = the headless Service's name, each
    # resolves as <job>-<index>.<service>.
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {"job-name": name}
    assert int(env["PORT"]) == port == container["ports"][0]["containerPort"]
    expected = [f"{name}-{i}.{service['metadata']['name']}:{port}" for i in range(workers)]
    configs = [pod_tf_config(job, i) for i in range(workers)]
    for i, config in enumerate(configs):
        assert tf_config.validate(config) == {"cluster": {"worker": expected}, "task": {"type": "worker", "index": i}}


def test_the_manifest_runs_notebook_05s_worker_script():
    _, job = manifest()
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "exec python workers/mwms_custom_loop.py" in script
    assert "REAL CLUSTER" in MANIFEST.read_text()
