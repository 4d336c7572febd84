#!/usr/bin/python3
"""Checks the deployment files in deploy/ against the sloserve binary they run.

Every manifest parses (the Helm chart once rendered with its values); every command a container,
service or unit runs is one `sloserve --check` accepts; every cluster file they carry loads and
simulates (`sloserve sim`), and names every node that a container runs; the probes ask the
KServe v2 health endpoints on the ingress's port. Images cannot be built nor Kubernetes run here.

    check_manifests.py SLOSERVE_BIN SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

import yaml

binary, root = sys.argv[1], sys.argv[2]
deploy = os.path.join(root, "deploy")
failures = []


def fail(where, why):
    failures.append("%s: %s" % (where, why))


def sloserve(args, where):
    r = subprocess.run([binary] + args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(where, "`sloserve %s` exits %d: %s" % (" ".join(args), r.returncode, (r.stderr or r.stdout).strip()[-300:]))
    return r.returncode == 0


def check_cluster_file(text, where):
    """Loads and simulates a cluster file; returns {node: http} or None."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        if not sloserve(["--log-level", "warn", "sim", "-c", path, "--rate", "10", "--duration", "1"], where):
            return None
    finally:
        os.unlink(path)
    return {n["name"]: n.get("http", "") for n in yaml.safe_load(text)["nodes"]}


def check_command(args, where, nodes, env=None):
    args = [str(a) for a in args]
    for k, v in (env or {}).items():
        args = [a.replace("$(%s)" % k, v) for a in args]
    sloserve(["--check"] + args, where)
    if "--name" in args and nodes is not None:
        name = args[args.index("--name") + 1]
        if name not in nodes:
            fail(where, "runs node '%s', which its cluster file does not list (%s)" % (name, ", ".join(nodes)))


def render_helm(chart):
    """Helm's rendering for what the chart uses: {{ .Values.x }} and {{- .Values.x | nindent N }}."""
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))

    def value(path):
        v = values
        for part in path.split("."):
            v = v[part]
        return v

    def sub(m):
        v = value(m.group(2))
        if m.group(3):  # nindent N
            pad = " " * int(m.group(3))
            return "\n" + "\n".join(pad + line if line else line for line in str(v).rstrip("\n").split("\n"))
        return str(v)

    out = []
    for name in sorted(os.listdir(os.path.join(chart, "templates"))):
        text = open(os.path.join(chart, "templates", name)).read()
        text = re.sub(r"[ \t]*\n?[ \t]*\{\{(-)? *\.Values\.([\w.]+) *\| *nindent (\d+) *\}\}", sub, text)
        text = re.sub(r"\{\{(-)? *\.Values\.([\w.]+)()() *\}\}", lambda m: str(value(m.group(2))), text)
        if "{{" in text:
            fail("helm/" + name, "uses template syntax this check does not render: " + text[text.index("{{"):][:60])
        out.append((name, text))
    return out, values


def check_kubernetes(docs, where):
    docs = [d for d in docs if d]
    cluster = None
    for d in docs:
        if d["kind"] == "ConfigMap" and "cluster.yaml" in d.get("data", {}):
            cluster = check_cluster_file(d["data"]["cluster.yaml"], where + " ConfigMap")
    if cluster is None:
        fail(where, "no ConfigMap with a loadable cluster.yaml")
        return
    http_port = None
    for name, http in cluster.items():
        if http:
            http_port = int(http.rsplit(":", 1)[1])
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    if not workloads:
        fail(where, "no Deployment or StatefulSet")
    for d in workloads:
        replicas = int(d["spec"].get("replicas", 1))
        for c in d["spec"]["template"]["spec"]["containers"]:
            w = "%s %s/%s" % (where, d["kind"], d["metadata"]["name"])
            command = c.get("command", [])
            if not command or not command[0].endswith("sloserve"):
                fail(w, "does not run sloserve: %s" % command)
                continue
            pods = [d["metadata"]["name"] + "-" + str(i) for i in range(replicas)] if d["kind"] == "StatefulSet" else [""]
            for pod in pods:
                check_command(command[1:] + c.get("args", []), w, cluster, {"POD_NAME": pod})
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in c:
                    continue
                get = c[probe].get("httpGet", {})
                if get.get("path") not in ("/v2/health/live", "/v2/health/ready"):
                    fail(w, "%s asks %s, not a KServe v2 health endpoint" % (probe, get.get("path")))
                if int(get.get("port", 0)) != http_port:
                    fail(w, "%s asks port %s; the ingress is on %s" % (probe, get.get("port"), http_port))
            if d["kind"] == "StatefulSet" and "nvidia.com/gpu" not in c.get("resources", {}).get("limits", {}):
                fail(w, "workers request no nvidia.com/gpu")


# Kubernetes manifests.
check_kubernetes(list(yaml.safe_load_all(open(os.path.join(deploy, "k8s", "sloserve.yaml")))), "k8s/sloserve.yaml")
# The Helm chart, rendered with its values.
chart = os.path.join(deploy, "helm", "sloserve")
yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))
rendered, values = render_helm(chart)
docs = []
for name, text in rendered:
    docs += list(yaml.safe_load_all(text))
check_kubernetes(docs, "helm/sloserve")

# Compose: the image's entrypoint is sloserve.
compose = yaml.safe_load(open(os.path.join(deploy, "compose.yaml")))
cluster = check_cluster_file(open(os.path.join(deploy, "compose-cluster.yaml")).read(), "compose-cluster.yaml")
for name, svc in compose["services"].items():
    check_command(svc["command"], "compose.yaml " + name, cluster)

# The Dockerfile's entrypoint and default command.
docker = open(os.path.join(deploy, "Dockerfile")).read()
entry = re.search(r'^ENTRYPOINT \["([^"]+)"\]', docker, re.M)
cmd = re.search(r"^CMD (\[.*\])", docker, re.M)
if not entry or not entry.group(1).endswith("sloserve"):
    fail("Dockerfile", "the entrypoint is not sloserve")
elif cmd:
    check_command(yaml.safe_load(cmd.group(1)), "Dockerfile CMD", None)

# The systemd unit.
unit = open(os.path.join(deploy, "sloserve-node@.service")).read()
exec_start = re.search(r"^ExecStart=(\S+) (.*)$", unit, re.M)
check_command(exec_start.group(2).replace("%i", "w1").split(), "sloserve-node@.service", None)

print("\n".join(failures) or "every deployment file runs commands sloserve accepts")
sys.exit(1 if failures else 0)
