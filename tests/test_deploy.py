"""deploy/: cluster launcher YAMLs pass Ray's own config validation; KubeRay and MLflow manifests have the
structure the docs promise (GPU vendors, accelerator_type resources, tracking URI, internal-only binding)."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
LAUNCHER_YAMLS = sorted(DEPLOY.glob("*.yaml"))
NVIDIA_ACCEL = "accelerator_type:H100"
AMD_ACCEL = "accelerator_type:AMD-Instinct-MI300X-OAM"


def load(path):
    return yaml.safe_load(path.read_text())


def load_all(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def ray_validate(config):
    """What `ray up` does to a config before launching anything: fill defaults, then validate against Ray's schema."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    with open(Path(__import__("ray.autoscaler", fromlist=["x"]).__file__).parent / "ray-schema.json") as f:
        jsonschema.validate(config, json.load(f))  # the file as written, before any defaults
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_launcher_yamls_exist():
    names = {p.name for p in LAUNCHER_YAMLS}
    assert {"azure-h100-mi300x.yaml", "onprem.yaml"} <= names


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_yaml_passes_ray_validation(path):
    prepared = ray_validate(load(path))
    assert prepared["head_node_type"] in prepared["available_node_types"]
    # The repository reaches every node and gets installed there.
    assert load(path)["file_mounts"] == {"~/raytune-attn": "."}
    cmds = " ".join(prepared["head_setup_commands"] + prepared["worker_setup_commands"])
    for t in prepared["available_node_types"].values():
        cmds += " ".join(t.get("worker_setup_commands", []))
    assert "pip install" in cmds and "~/raytune-attn" in cmds
    # Jobs on the head see the MLflow tracking URI; the server and the dashboard bind loopback only.
    head = " ".join(prepared["head_setup_commands"] + prepared["head_start_ray_commands"])
    assert "MLFLOW_TRACKING_URI=" in head
    assert "mlflow server --host 127.0.0.1" in head and "0.0.0.0" not in head
    assert "--dashboard-host=127.0.0.1" in head


def test_bad_launcher_yaml_is_rejected_by_the_same_validation():
    cfg = load(DEPLOY / "azure-h100-mi300x.yaml")
    cfg["available_node_types"]["h100"]["resources"]["GPU"] = "eight"
    with pytest.raises(Exception, match="eight"):
        ray_validate(cfg)
    cfg = load(DEPLOY / "azure-h100-mi300x.yaml")
    cfg["head_node_type"] = "nope"
    with pytest.raises(ValueError, match="head_node_type"):
        ray_validate(cfg)


def test_cloud_yaml_has_nvidia_and_amd_node_types_with_accelerator_types():
    cfg = ray_validate(load(DEPLOY / "azure-h100-mi300x.yaml"))
    types = cfg["available_node_types"]
    h100, mi300x = types["h100"], types["mi300x"]
    assert h100["resources"][NVIDIA_ACCEL] == 1 and h100["resources"]["GPU"] == 8
    assert mi300x["resources"][AMD_ACCEL] == 1 and mi300x["resources"]["GPU"] == 8
    assert "H100" in h100["node_config"]["azure_arm_parameters"]["vmSize"]
    assert "MI300X" in mi300x["node_config"]["azure_arm_parameters"]["vmSize"]
    assert h100["labels"]["raytune-attn/vendor"] == "nvidia" and mi300x["labels"]["raytune-attn/vendor"] == "amd"
    assert not any(k.startswith("accelerator_type:") for k in types["head"]["resources"])
    # The AMD nodes get the ROCm torch build before the package (so pip keeps it).
    amd_cmds = mi300x["worker_setup_commands"]
    rocm = next(i for i, c in enumerate(amd_cmds) if "rocm" in c)
    assert rocm < next(i for i, c in enumerate(amd_cmds) if "-e ~/raytune-attn" in c)
    # The names are Ray's own (what its accelerator managers detect on those GPUs).
    from ray.util import accelerators

    assert NVIDIA_ACCEL.split(":", 1)[1] == accelerators.NVIDIA_H100
    assert AMD_ACCEL.split(":", 1)[1] == accelerators.AMD_INSTINCT_MI300x


def test_onprem_yaml_single_node_type_resources_in_start_commands():
    cfg = ray_validate(load(DEPLOY / "onprem.yaml"))
    assert cfg["provider"]["type"] == "local" and len(cfg["available_node_types"]) == 1
    starts = cfg["worker_start_ray_commands"] + cfg["head_start_ray_commands"]
    assert sum("deploy/onprem/node-resources.sh" in c for c in starts) == 2


def _fake_tool(bindir: Path, name: str, script: str) -> None:
    p = bindir / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(0o755)


# The programs deploy/onprem/node-resources.sh runs besides the GPU tools (bash's builtins aside). Its tests give it a
# PATH of links to exactly these beside the stand-ins, so a GPU machine's own nvidia-smi or rocm-smi (in /usr/bin)
# is never what the script finds.
NODE_RESOURCES_UTILS = ("sed", "tr", "grep", "head")


def _link_utils(bindir: Path) -> None:
    for name in NODE_RESOURCES_UTILS:
        real = shutil.which(name)
        if real is None:
            pytest.skip(f"node-resources.sh needs {name}")
        (bindir / name).symlink_to(real)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("tool,script,expect", [
    ("nvidia-smi", 'case "$*" in *compute_cap*) echo 9.0;; *) echo "NVIDIA H100 80GB HBM3";; esac\n',
     '--resources={"accelerator_type:H100":1} --labels=raytune-attn/vendor=nvidia,raytune-attn/arch=sm90'),
    ("rocm-smi", 'echo "GPU[0] : Card Series: AMD Instinct MI300X OAM"; echo "GPU[0] : GFX Version: gfx942"\n',
     '--resources={"accelerator_type:AMD-Instinct-MI300X-OAM":1} '
     '--labels=raytune-attn/vendor=amd,raytune-attn/arch=gfx942'),
    ("rocm-smi", 'echo "GPU[0] : Card Series: AMD Instinct MI325X"; echo "GPU[0] : GFX Version: gfx942"\n',
     '--resources={"accelerator_type:AMD-Instinct-MI325X-OAM":1} '
     '--labels=raytune-attn/vendor=amd,raytune-attn/arch=gfx942'),
    ("rocm-smi", 'echo "GPU[0] : Card Series: AMD Instinct MI250"; echo "GPU[0] : GFX Version: gfx90a"\n',
     '--resources={"accelerator_type:AMD-Instinct-MI250X-MI250":1} '
     '--labels=raytune-attn/vendor=amd,raytune-attn/arch=gfx90a'),
    ("rocm-smi", 'echo "GPU[0] : Card Series: AMD Instinct MI210"; echo "GPU[0] : GFX Version: gfx90a"\n',
     '--resources={"accelerator_type:AMD-Instinct-MI210":1} '
     '--labels=raytune-attn/vendor=amd,raytune-attn/arch=gfx90a'),
    (None, "", "--labels=raytune-attn/vendor=cpu"),
])
def test_onprem_node_resources_script(tmp_path, tool, script, expect):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if tool:
        _fake_tool(bindir, tool, script)
    _link_utils(bindir)
    env = {"PATH": str(bindir), "HOME": str(tmp_path)}
    bash = shutil.which("bash")
    out = subprocess.run([bash, str(DEPLOY / "onprem" / "node-resources.sh")], env=env, capture_output=True,
                         text=True, timeout=30, check=True).stdout.strip()
    assert out == expect
    flags = dict(f.split("=", 1) for f in out.split())
    if "--resources" in flags:
        assert json.loads(flags["--resources"])  # what `ray start --resources` parses
    # A per-host override file wins.
    (tmp_path / ".raytune-attn").mkdir()
    (tmp_path / ".raytune-attn" / "ray-start-flags").write_text('--resources={"accelerator_type:A100":1}\n')
    out = subprocess.run([bash, str(DEPLOY / "onprem" / "node-resources.sh")], env=env, capture_output=True,
                         text=True, timeout=30, check=True).stdout.strip()
    assert out == '--resources={"accelerator_type:A100":1}'


NVIDIA_NAMES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA RTX A6000", "NVIDIA L40S",
                "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4090", "NVIDIA RTX 6000 Ada Generation",
                "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA B200")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_onprem_node_resources_names_nvidia_gpus_as_ray_does(tmp_path):
    """The script's accelerator_type is Ray's own name for the card (Ray's detection is the oracle, a private function
    read only here), so a host never carries two accelerator_type resources that the sweep would have to choose from."""
    ray_nvidia = pytest.importorskip("ray._private.accelerators.nvidia_gpu")
    ray_name = ray_nvidia.NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _link_utils(bindir)
    for name in NVIDIA_NAMES:
        _fake_tool(bindir, "nvidia-smi", f'case "$*" in *compute_cap*) echo 9.0;; *) echo "{name}";; esac\n')
        out = subprocess.run([shutil.which("bash"), str(DEPLOY / "onprem" / "node-resources.sh")],
                             env={"PATH": str(bindir), "HOME": str(tmp_path)}, capture_output=True, text=True,
                             timeout=30, check=True).stdout
        assert json.loads(out.split()[0].split("=", 1)[1]) == {f"accelerator_type:{ray_name(name)}": 1}, name


# ------------------------------------------------------------------------------------------------ KubeRay


def _ray_cluster_specs():
    docs = {}
    for name in ("raycluster.yaml", "rayjob.yaml"):
        for d in load_all(DEPLOY / "kuberay" / name):
            if d.get("apiVersion") == "ray.io/v1":
                docs[d["kind"]] = d
    assert set(docs) == {"RayCluster", "RayJob"}
    return {"RayCluster": docs["RayCluster"]["spec"], "RayJob": docs["RayJob"]["spec"]["rayClusterSpec"]}, docs


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_kuberay_manifest_structure(kind):
    specs, docs = _ray_cluster_specs()
    spec = specs[kind]
    assert docs[kind]["metadata"]["name"]
    assert spec["rayVersion"] == __import__("ray").__version__
    head = spec["headGroupSpec"]
    head_c = head["template"]["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in head_c["env"]}["MLFLOW_TRACKING_URI"].startswith("http://mlflow.")
    assert all(isinstance(v, str) for v in head["rayStartParams"].values())  # KubeRay wants strings
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert set(groups) == {"h100", "mi300x"}
    for name, vendor_res, accel in (("h100", "nvidia.com/gpu", NVIDIA_ACCEL), ("mi300x", "amd.com/gpu", AMD_ACCEL)):
        g = groups[name]
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]
        c = g["template"]["spec"]["containers"][0]
        n = c["resources"]["limits"][vendor_res]
        assert n == c["resources"]["requests"][vendor_res] and n >= 1
        other = "amd.com/gpu" if vendor_res == "nvidia.com/gpu" else "nvidia.com/gpu"
        assert other not in c["resources"]["limits"]
        params = g["rayStartParams"]
        assert all(isinstance(v, str) for v in params.values())
        assert int(params["num-gpus"]) == n  # KubeRay does not derive it from amd.com/gpu
        res = json.loads(json.loads(params["resources"]))  # KubeRay passes it quoted to `ray start --resources`
        assert res == {accel: 1}
        assert any(k.startswith(vendor_res.split("/")[0]) for k in g["template"]["spec"]["nodeSelector"])
        assert "rocm" in c["image"] if name == "mi300x" else "cuda" in c["image"]


def test_rayjob_runs_the_pipeline_with_tracking_uri():
    _, docs = _ray_cluster_specs()
    job = docs["RayJob"]["spec"]
    assert "pipelines/sweep.py" in job["entrypoint"] and "--problems" in job["entrypoint"]
    assert "--address" not in job["entrypoint"]  # sweep.py defaults to auto: the cluster KubeRay started
    env = yaml.safe_load(job["runtimeEnvYAML"])["env_vars"]
    assert env["MLFLOW_TRACKING_URI"].startswith("http://mlflow.")
    assert job["shutdownAfterJobFinishes"] is True
    for f in re.findall(r"/opt/raytune-attn/(\S+)", job["entrypoint"]):
        assert (ROOT / f).exists(), f  # the image copies the repository to /opt/raytune-attn
    dockerfiles = [(DEPLOY / "docker" / n).read_text() for n in ("Dockerfile.cuda", "Dockerfile.rocm")]
    assert all("/opt/raytune-attn" in d and "pip install" in d for d in dockerfiles)
    bases = [re.search(r"^FROM rayproject/ray:(\S+)", d, re.M) for d in dockerfiles]
    assert all(bases), "both images start from Ray's image"
    # The same Ray and Python on every pod of the cluster (Ray refuses a worker whose Python differs from the head's),
    # and the Ray of the manifests.
    versions = [b.group(1).split("-")[:2] for b in bases]
    assert versions[0] == versions[1] and versions[0][0] == docs["RayJob"]["spec"]["rayClusterSpec"]["rayVersion"]


# ------------------------------------------------------------------------------------------------ MLflow server


def test_mlflow_k8s_deployment_internal_only():
    docs = {d["kind"]: d for d in load_all(DEPLOY / "mlflow" / "k8s.yaml")}
    assert {"Deployment", "Service", "PersistentVolumeClaim", "Secret"} <= set(docs)
    svc = docs["Service"]
    assert svc["metadata"]["name"] == "mlflow" and svc["spec"]["type"] == "ClusterIP"
    dep = docs["Deployment"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = dict(a.lstrip("-").split("=", 1) for a in c["args"])
    assert args["host"] == "$(POD_IP)" and "0.0.0.0" not in json.dumps(dep)
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert args["backend-store-uri"] == "$(MLFLOW_BACKEND_STORE_URI)"
    backend = docs["Secret"]["stringData"]["MLFLOW_BACKEND_STORE_URI"]
    assert backend.startswith(("sqlite:///", "postgresql://"))
    assert args["artifacts-destination"].startswith("/mlflow")
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/mlflow"}
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == docs["PersistentVolumeClaim"]["metadata"]["name"]
    # The Service name the Ray manifests use is allowed as a Host header (MLflow 3 rejects unknown hosts).
    assert "mlflow.raytune-attn.svc.cluster.local:5000" in args["allowed-hosts"].split(",")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    _, ray_docs = _ray_cluster_specs()
    env_uri = yaml.safe_load(ray_docs["RayJob"]["spec"]["runtimeEnvYAML"])["env_vars"]["MLFLOW_TRACKING_URI"]
    assert env_uri == "http://mlflow.raytune-attn.svc.cluster.local:5000" == f"http://{svc['metadata']['name']}" \
        f".raytune-attn.svc.cluster.local:{svc['spec']['ports'][0]['port']}"


def test_mlflow_onprem_systemd_and_compose_bind_internal():
    unit = (DEPLOY / "mlflow" / "mlflow.service").read_text()
    assert "[Service]" in unit and "[Install]" in unit
    assert "Environment=MLFLOW_HOST=127.0.0.1" in unit and "--host ${MLFLOW_HOST}" in unit
    assert "--backend-store-uri ${MLFLOW_BACKEND_STORE_URI}" in unit and "--artifacts-destination" in unit
    env = dict(line.split("=", 1) for line in (DEPLOY / "mlflow" / "mlflow.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["MLFLOW_HOST"] == "127.0.0.1"
    compose = load(DEPLOY / "mlflow" / "docker-compose.yaml")
    ml = compose["services"]["mlflow"]
    assert ml["ports"] == ["${MLFLOW_BIND:-127.0.0.1}:5000:5000"]
    assert "ports" not in compose["services"]["postgres"]
    assert "postgresql://" in ml["command"] and "0.0.0.0" not in ml["command"]
    assert not re.search(r"ExecStart=.*0\.0\.0\.0", unit)


@pytest.mark.slow
def test_mlflow_server_starts_as_deployed_and_sweeps_can_reach_it(tmp_path):
    """The on-prem unit's command line, run here on loopback: it serves /health and the tracking API."""
    import socket
    import time
    import urllib.request

    # `python -m mlflow`: this interpreter's MLflow, with or without an `mlflow` console script beside it. The server
    # needs MLflow's server side (Flask, ...), which a client-only install lacks.
    pytest.importorskip("flask", reason="`mlflow server` needs Flask, which is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    unit = (DEPLOY / "mlflow" / "mlflow.service").read_text()
    cmd = re.search(r"^ExecStart=\S+ (.*)$", unit, re.M).group(1)
    values = {"MLFLOW_HOST": "127.0.0.1", "MLFLOW_PORT": str(port),
              "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{tmp_path}/mlflow.db",
              "MLFLOW_ARTIFACTS_DESTINATION": str(tmp_path / "artifacts")}
    args = [values.get(a[2:-1], a) if a.startswith("${") else a for a in cmd.split()]
    argv = [sys.executable, "-m", "mlflow", *args, "--workers", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"mlflow server did not come up: {proc.stderr.read().decode()[-2000:]}")
                time.sleep(1)
        from raytune_attn.tune import doctor

        m = doctor.mlflow_tracking(f"http://127.0.0.1:{port}", timeout=5)
        assert m["reachable"] and m["status"] == "server healthy"
    finally:
        try:
            os.killpg(proc.pid, 15)
        except ProcessLookupError:
            pass  # it exited already: the failure above says why
        proc.wait(timeout=30)


# ------------------------------------------------------------------------------------------------ installs


def test_requirements_file_is_the_tune_extra_without_torch_and_triton():
    """deploy/requirements-tune.txt (for hosts and images that keep their torch build) lists what the package and its
    tune extra need, less torch and triton: the same requirements as pyproject.toml, no more, no fewer."""
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {str(Requirement(r)) for r in project["dependencies"] + project["optional-dependencies"]["tune"]
              if Requirement(r).name not in ("torch", "triton")}
    lines = [ln.strip() for ln in (DEPLOY / "requirements-tune.txt").read_text().splitlines()]
    listed = {str(Requirement(ln)) for ln in lines if ln and not ln.startswith("#")}
    assert listed == wanted


def _node_installs():
    """(where, its install commands in the order they run) for every node type of every launcher YAML (the global
    setup_commands, then the head's or the node type's worker commands) and every Dockerfile (its RUN steps)."""
    for path in LAUNCHER_YAMLS:
        c = load(path)
        types = ray_validate(c)  # the node types as `ray up` fills them in (the local provider's included)
        for name, node in types["available_node_types"].items():
            own = c.get("head_setup_commands", []) if name == types["head_node_type"] else node.get(
                "worker_setup_commands", c.get("worker_setup_commands", []))
            yield f"{path.name}:{name}", list(c.get("setup_commands", [])) + list(own)
    for path in sorted((DEPLOY / "docker").glob("Dockerfile.*")):
        text = path.read_text().replace("\\\n", " ")
        runs = [ln[4:] for ln in text.splitlines() if ln.startswith("RUN ")]
        yield path.name, [step.strip() for run in runs for step in run.split("&&")]


def test_every_node_gets_the_tuner_and_a_kept_torch_keeps_its_triton():
    """Each node installs the repository once, with the tune extra (the driver imports scikit-optimize and MLflow,
    the trials pandas and pyarrow), in one of two forms: `pip install -e '<repo>[tune]'`, or, where the host's or
    image's torch is kept (ROCm builds, on-prem hosts), the requirements file and then `--no-deps`, so that pip does
    not put PyPI's triton over a pytorch-triton-rocm."""
    for where, commands in _node_installs():
        installs = [i for i, c in enumerate(commands) if re.search(r"pip install .*-e \S*raytune-attn", c)]
        assert len(installs) == 1, (where, commands)
        step = commands[installs[0]]
        kept_torch = where.startswith(("onprem", "Dockerfile.rocm")) or any("rocm" in c for c in commands)
        if kept_torch:
            assert "--no-deps" in step and "[tune]" not in step, (where, step)
        if "--no-deps" in step:
            before = commands[:installs[0]]
            assert any("-r " in c and "deploy/requirements-tune.txt" in c for c in before), (where, commands)
        else:
            assert "[tune]" in step, (where, step)


def test_the_image_build_context_leaves_out_what_git_ignores():
    """`COPY . /opt/raytune-attn` takes the whole build context: .dockerignore leaves out the git history and every
    path .gitignore names (a clone's .venv alone is gigabytes), and nothing the image runs from."""
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    git_ignored = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()
                   if line.strip() and not line.startswith("#")}
    assert ".git/" in ignored
    assert {p.replace("__pycache__/", "**/__pycache__/") for p in git_ignored} <= ignored
    needed = ("raytune_attn", "pipelines", "search_spaces", "pyproject.toml", "README.md")
    assert not any(p.rstrip("/") in needed for p in ignored)
