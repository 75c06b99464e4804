"""cluster/kubernetes/mwms-jobset.yaml, checked without Kubernetes: the JobSet against JobSet's own CRD schema
(vendored in tests/schemas/, strict: no unknown field), its Job template and the volume claim against
Kubernetes' own schemas (kubernetes-validate, strict), and every pod's start-up script run with that pod's
index and CPU limit, whose TF_CONFIGs must describe one cluster at the DNS names JobSet gives the pods."""

import copy
import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml

from course_utils import tf_config

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "cluster" / "kubernetes" / "mwms-jobset.yaml"
JOBSET_SCHEMA = ROOT / "tests" / "schemas" / "jobset.x-k8s.io_v1alpha2.schema.json"
OLDEST_KUBERNETES = (1, 25)  # the Job template: stable since 1.24; kubernetes-validate's schemas start at 1.25


def manifest() -> dict:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def worker_job(jobset: dict) -> dict:
    (replicated,) = jobset["spec"]["replicatedJobs"]
    return replicated["template"]


def strict(schema):
    """The CRD schema with unknown fields refused wherever it lists an object's fields (as the API server
    prunes or, with kubectl's strict field validation, rejects them)."""
    if isinstance(schema, dict):
        schema = {key: strict(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and \
                not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [strict(value) for value in schema]
    return schema


def validate_jobset(doc: dict) -> None:
    import jsonschema

    schema = strict(json.loads(JOBSET_SCHEMA.read_text()))
    jsonschema.validate(doc, schema)  # raises with the offending field


def cpu_quantity(value: str) -> float:
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


# Labels JobSet puts on every pod it creates (its API's JobSetUIDKey and RestartsKey), with stand-in values
JOBSET_LABELS = {"metadata.labels['jobset.sigs.k8s.io/jobset-uid']": "5f0c-test-uid",
                 "metadata.labels['jobset.sigs.k8s.io/restart-attempt']": "0"}


def container_env(container: dict) -> dict:
    """The container's variables as Kubernetes sets them; a CPU limit through the downward API is rounded up
    to whole units of its divisor, as the kubelet does."""
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "fieldRef" in var["valueFrom"]:  # a pod label JobSet sets: a stand-in value of that label
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in JOBSET_LABELS, f"{var['name']}: {path} is not a label JobSet puts on its pods"
            env[var["name"]] = JOBSET_LABELS[path]
        else:
            ref = var["valueFrom"]["resourceFieldRef"]
            assert ref["containerName"] == container["name"] and ref["resource"] == "limits.cpu", ref
            limit = cpu_quantity(container["resources"]["limits"]["cpu"])
            env[var["name"]] = str(math.ceil(limit / cpu_quantity(ref.get("divisor", "1"))))
    return env


def pod_start(job: dict, index: int, cpus: str | None = None) -> tuple[dict, str, list[str]]:
    """Run the pod's start-up script as its container would, printing instead of starting the worker:
    ``(TF_CONFIG, the thread variables it exported, the worker's command line as the shell expanded it)``."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace(
        "exec python", 'echo "THREADS=$TF_NUM_INTRAOP_THREADS,$TF_NUM_INTEROP_THREADS,$OMP_NUM_THREADS"; '
                       "printf 'ARG=%s\\n' python")
    env = {**container_env(container), "JOB_COMPLETION_INDEX": str(index), **({"CPUS": cpus} if cpus else {})}
    out = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    command = [line[4:] for line in out.splitlines() if line.startswith("ARG=")]
    threads = out.split("THREADS=", 1)[1].splitlines()[0].strip()
    return json.loads(out.split("TF_CONFIG=", 1)[1].splitlines()[0]), threads, command


def supported_versions() -> list[str]:
    from kubernetes_validate import utils

    found = {v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) >= OLDEST_KUBERNETES}
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def test_the_jobset_is_valid_for_jobsets_crd():
    pytest.importorskip("jsonschema")
    validate_jobset(manifest()["JobSet"])


def test_the_jobset_schema_check_catches_a_wrong_field():
    jsonschema = pytest.importorskip("jsonschema")
    for where, wrong in (("spec", {"failurePolicy": {"maxRestart": 3}}),  # 'maxRestarts' misspelt
                         ("spec", {"network": {"publishNotReadyAdresses": True}})):
        jobset = copy.deepcopy(manifest()["JobSet"])
        jobset[where].update(wrong)
        with pytest.raises(jsonschema.ValidationError):
            validate_jobset(jobset)


def test_the_job_template_and_the_claim_are_valid_for_every_kubernetes_version_it_claims():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    versions = supported_versions()
    assert versions[0].startswith("1.25") and len(versions) >= 10, versions
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "mwms-worker-0"},
           **worker_job(manifest()["JobSet"])}
    for version in versions:
        for doc in (job, manifest()["PersistentVolumeClaim"]):
            kubernetes_validate.validate(doc, version, strict=True)  # raises with the offending field


def test_the_schema_check_catches_a_wrong_field_in_the_pod():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, **worker_job(manifest()["JobSet"])}
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "2"}  # 'limits' misspelt
    with pytest.raises(kubernetes_validate.ValidationError, match="limit"):
        kubernetes_validate.validate(job, supported_versions()[-1], strict=True)


def test_every_pod_gets_the_same_cluster_its_own_task_and_threads_for_its_cpus():
    jobset = manifest()["JobSet"]
    (replicated,) = jobset["spec"]["replicatedJobs"]
    job = replicated["template"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    workers = spec["completions"]
    container = pod["containers"][0]
    env = container_env(container)
    assert replicated["replicas"] == 1 and spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == workers == int(env["WORKERS"])
    # JobSet names pod i of job j of replicated job r <jobset>-<r>-<j>-<i>, with the subdomain <jobset> (its
    # headless Service) when network.enableDNSHostnames is on; publishNotReadyAddresses: names before readiness
    network = jobset["spec"]["network"]
    assert network["enableDNSHostnames"] and network["publishNotReadyAddresses"]
    name, subdomain = jobset["metadata"]["name"], network.get("subdomain", jobset["metadata"]["name"])
    port = int(env["PORT"])
    assert port == container["ports"][0]["containerPort"]
    expected = [f"{name}-{replicated['name']}-0-{i}.{subdomain}:{port}" for i in range(workers)]
    cpus = str(math.ceil(cpu_quantity(container["resources"]["limits"]["cpu"])))
    for i in range(workers):
        config, threads, _ = pod_start(job, i)
        assert tf_config.validate(config) == {"cluster": {"worker": expected}, "task": {"type": "worker", "index": i}}
        assert threads == f"{cpus},{min(int(cpus), 2)},{cpus}", "thread pools from the pod's CPU limit, inter-op <= 2"
    assert pod_start(job, 0, cpus="1")[1] == "1,1,1"


def test_a_failure_restarts_every_worker_together_from_state_on_a_shared_volume():
    docs = manifest()
    jobset, claim = docs["JobSet"], docs["PersistentVolumeClaim"]
    job = worker_job(jobset)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # no restart in place: a failed pod fails its Job, and the JobSet recreates the whole group
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    policy = jobset["spec"]["failurePolicy"]
    assert policy["maxRestarts"] >= 1 and policy.get("restartStrategy", "Recreate") == "Recreate"
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["worker"]}
    assert job["spec"]["activeDeadlineSeconds"] > 0
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory", "NCCL's shared memory"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "pods on different nodes mount it"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["shm"] == "/dev/shm"
    image = container["image"]
    assert ":" in image.rsplit("/", 1)[1] and not image.endswith(":latest"), "a pinned image"
    command = pod_start(job, 1)[2]
    worker = command[1]
    assert command[0] == "python" and worker == "cluster/workers/mwms_fit.py" and (ROOT / worker).exists()
    out = command[command.index("--out") + 1]
    assert out.startswith(mounts["results"] + "/"), "the worker's state and results are on the volume"
    assert JOBSET_LABELS["metadata.labels['jobset.sigs.k8s.io/jobset-uid']"] in out, (
        "a folder per JobSet: a restarted group finds its state, a new submission does not resume another's")
    assert command[command.index("--backup-every") + 1].isdigit(), "a backup every N steps, not only per epoch"
    source = (ROOT / worker).read_text()  # notebook 05's script (tests/test_cluster_files.py)
    assert 'BackupAndRestore(os.path.join(args.out, "backup"), save_freq=args.backup_every' in source, (
        "the worker resumes from --out")
    assert "REAL CLUSTER" in MANIFEST.read_text()
