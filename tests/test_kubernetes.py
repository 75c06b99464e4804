"""cluster/kubernetes/mwms-job.yaml, checked without Kubernetes: every object against Kubernetes' own schemas
(kubernetes-validate, strict: no unknown field), and every pod's start-up script run with that pod's index
and CPU limit, whose TF_CONFIGs must describe one cluster that the Service and Job create."""

import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml

from course_utils import notebook_files, tf_config

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "cluster" / "kubernetes" / "mwms-job.yaml"
OLDEST_KUBERNETES = (1, 25)  # the manifest's claim: Indexed Jobs are stable since 1.24; the schemas start at 1.25


def manifest() -> dict:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def cpu_quantity(value: str) -> float:
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def container_env(container: dict) -> dict:
    """The container's variables as Kubernetes sets them; a CPU limit through the downward API is rounded up
    to whole units of its divisor, as the kubelet does."""
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["resourceFieldRef"]
            assert ref["containerName"] == container["name"] and ref["resource"] == "limits.cpu", ref
            limit = cpu_quantity(container["resources"]["limits"]["cpu"])
            env[var["name"]] = str(math.ceil(limit / cpu_quantity(ref.get("divisor", "1"))))
    return env


def pod_start(job: dict, index: int) -> tuple[dict, str]:
    """Run the pod's start-up script as its container would, stopping before it starts the worker:
    ``(TF_CONFIG, the thread variables it exported)``."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace(
        "exec python", 'echo "THREADS=$TF_NUM_INTRAOP_THREADS,$TF_NUM_INTEROP_THREADS,$OMP_NUM_THREADS"; exit 0 #')
    env = {**container_env(container), "JOB_COMPLETION_INDEX": str(index)}
    out = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.split("TF_CONFIG=", 1)[1].splitlines()[0]), out.split("THREADS=", 1)[1].strip()


def supported_versions() -> list[str]:
    from kubernetes_validate import utils

    found = {v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) >= OLDEST_KUBERNETES}
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def test_every_object_is_valid_for_every_kubernetes_version_it_claims():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    versions = supported_versions()
    assert versions[0].startswith("1.25") and len(versions) >= 10, versions
    for version in versions:
        for doc in manifest().values():
            kubernetes_validate.validate(doc, version, strict=True)  # raises with the offending field


def test_the_schema_check_catches_a_wrong_field():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    job = manifest()["Job"]
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "2"}  # 'limits' misspelt
    with pytest.raises(kubernetes_validate.ValidationError, match="limit"):
        kubernetes_validate.validate(job, supported_versions()[-1], strict=True)


def test_every_pod_gets_the_same_cluster_its_own_task_and_threads_for_its_cpus():
    docs = manifest()
    service, job = docs["Service"], docs["Job"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    workers = spec["completions"]
    container = pod["containers"][0]
    env = container_env(container)
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == workers == int(env["WORKERS"])
    name, port = job["metadata"]["name"], service["spec"]["ports"][0]["port"]
    # Pods of an Indexed Job are named <job>-<index>; with subdomain = the headless Service's name, each
    # resolves as <job>-<index>.<service>.
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {"job-name": name}
    assert int(env["PORT"]) == port == container["ports"][0]["containerPort"]
    expected = [f"{name}-{i}.{service['metadata']['name']}:{port}" for i in range(workers)]
    cpus = str(math.ceil(cpu_quantity(container["resources"]["limits"]["cpu"])))
    for i in range(workers):
        config, threads = pod_start(job, i)
        assert tf_config.validate(config) == {"cluster": {"worker": expected}, "task": {"type": "worker", "index": i}}
        assert threads == f"{cpus},{cpus},{cpus}", "the thread pools are sized to the pod's CPU limit"


def test_a_failed_worker_resumes_from_state_on_a_volume_every_pod_mounts():
    docs = manifest()
    job, claim = docs["Job"], docs["PersistentVolumeClaim"]
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # a container that fails is restarted in its pod (same name, same DNS name), within the Job's backoffLimit
    assert pod["restartPolicy"] == "OnFailure" and job["spec"]["backoffLimit"] >= 2
    (volume,) = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "pods on different nodes mount it"
    (mount,) = container["volumeMounts"]
    assert mount["name"] == volume["name"]
    script = container["args"][0]
    worker = script.split("exec python ", 1)[1].split()[0]
    assert worker == "workers/mwms_fit.py"
    out = script.split("--out ", 1)[1].split()[0]
    assert out.startswith(mount["mountPath"] + "/"), "the worker's state and results are on the volume"
    source = notebook_files.writefile_cells(ROOT / "notebooks" / "05_multi_worker.ipynb")[worker]  # 05 writes it
    assert 'BackupAndRestore(os.path.join(args.out, "backup"))' in source, "the worker resumes from --out"
    assert "REAL CLUSTER" in MANIFEST.read_text()
