#!/usr/bin/python3
"""Checks the deployment files in deploy/ against the sloserve binary they run.

Every manifest parses (the Helm chart once rendered with its values); every command a container,
service or unit runs is one `sloserve --check` accepts; every cluster file they carry loads and
simulates (`sloserve sim`), and names every node that a container runs; the probes ask the
KServe v2 health endpoints on the ingress's port; containers expose the ports their node's
ingresses and /metrics listen on, and Prometheus is pointed at /metrics where it is served
(`promtool check config`); the Grafana dashboard's queries parse (`promtool check rules`) and
name only series sloserve exports (actors/metrics.cpp). Images cannot be built nor Kubernetes
run here.

    check_manifests.py SLOSERVE_BIN SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helm_render import render_helm  # noqa: E402

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
    """Loads and simulates a cluster file; returns {node: its node map} or None."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        if not sloserve(["--log-level", "warn", "sim", "-c", path, "--rate", "10", "--duration", "1"], where):
            return None
    finally:
        os.unlink(path)
    nodes = {}
    for n in yaml.safe_load(text)["nodes"]:  # an entry with `replicas: N` stands for NAME-0 ... NAME-(N-1)
        if "replicas" not in n:
            nodes[n["name"]] = n
        for i in range(int(n.get("replicas", 0))):
            nodes["%s-%d" % (n["name"], i)] = {k: v.replace("{i}", str(i)) if isinstance(v, str) else v
                                               for k, v in n.items()}
    return nodes


def port_of(host_port):
    return int(host_port.rsplit(":", 1)[1]) if host_port else None


def metrics_ports(node):
    """Where a node serves /metrics: its HTTP ingress and its metrics port."""
    return {p for p in (port_of(node.get("http")), port_of(node.get("metrics"))) if p}


def check_command(args, where, nodes, env=None):
    args = [str(a) for a in args]
    for k, v in (env or {}).items():
        args = [a.replace("$(%s)" % k, v) for a in args]
    sloserve(["--check"] + args, where)
    if "--name" in args and nodes is not None:
        name = args[args.index("--name") + 1]
        if name not in nodes:
            fail(where, "runs node '%s', which its cluster file does not list (%s)" % (name, ", ".join(nodes)))


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
    for name, node in cluster.items():
        if node.get("http"):
            http_port = port_of(node["http"])
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
            exposed = {int(p["containerPort"]) for p in c.get("ports", [])}
            annotations = d["spec"]["template"]["metadata"].get("annotations", {})
            for pod in pods:
                args = command[1:] + c.get("args", [])
                check_command(args, w, cluster, {"POD_NAME": pod})
                name = args[args.index("--name") + 1].replace("$(POD_NAME)", pod) if "--name" in args else None
                node = cluster.get(name, {})
                for key in ("http", "grpc", "metrics"):
                    if node.get(key) and port_of(node[key]) not in exposed:
                        fail(w, "node %s serves %s on port %d, which the container does not expose" %
                             (name, key, port_of(node[key])))
                if annotations.get("prometheus.io/scrape") == "true":
                    port = int(annotations.get("prometheus.io/port", 0))
                    if port not in metrics_ports(node):
                        fail(w, "Prometheus is told to scrape port %d; node %s serves /metrics on %s" %
                             (port, name, sorted(metrics_ports(node)) or "no port"))
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in c:
                    continue
                get = c[probe].get("httpGet", {})
                if get.get("path") not in ("/v2/health/live", "/v2/health/ready"):
                    fail(w, "%s asks %s, not a KServe v2 health endpoint" % (probe, get.get("path")))
                if int(get.get("port", 0)) != http_port:
                    fail(w, "%s asks port %s; the ingress is on %s" % (probe, get.get("port"), http_port))
            # A GPU is requested where the pod's node has cuda devices, and only there: a pod that
            # asks for one a cluster without GPUs cannot give stays Pending.
            gpus = int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
            for pod in pods:
                args = command[1:] + c.get("args", [])
                name = args[args.index("--name") + 1].replace("$(POD_NAME)", pod) if "--name" in args else None
                cuda = sum(int(g.get("count", 1)) for g in cluster.get(name, {}).get("devices", []) if g.get("kind") == "cuda")
                if cuda and gpus < 1:
                    fail(w, "node %s has cuda devices; its pod requests no nvidia.com/gpu" % name)
                if not cuda and gpus:
                    fail(w, "node %s has no cuda device; its pod requests nvidia.com/gpu and would stay Pending" % name)
    # Headless Services name pods that must reach each other before any is ready.
    for d in docs:
        if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None" and not d["spec"].get("publishNotReadyAddresses"):
            fail("%s Service/%s" % (where, d["metadata"]["name"]),
                 "headless without publishNotReadyAddresses: nodes cannot resolve pods that are not ready yet")
    for d in workloads:
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c.get("image", "").endswith(":latest") or ":" not in c.get("image", ""):
                fail("%s %s/%s" % (where, d["kind"], d["metadata"]["name"]), "image %s has no version" % c.get("image"))
            container_ports.update(int(p["containerPort"]) for p in c.get("ports", []))


container_ports = set()  # every port a Kubernetes container exposes
# Kubernetes manifests.
check_kubernetes(list(yaml.safe_load_all(open(os.path.join(deploy, "k8s", "sloserve.yaml")))), "k8s/sloserve.yaml")
# The Helm chart, rendered with its values.
chart = os.path.join(deploy, "helm", "sloserve")
yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))
rendered, values, unrendered = render_helm(chart)
for name, why in unrendered:
    fail("helm/" + name, why)
docs = []
for name, text in rendered:
    docs += list(yaml.safe_load_all(text))
check_kubernetes(docs, "helm/sloserve")
# With another worker count (`helm install --set workers=3`), the cluster file still has a node
# for each pod.
rendered, _, _ = render_helm(chart, {"workers": 3})
check_kubernetes([doc for _, text in rendered for doc in yaml.safe_load_all(text)], "helm/sloserve --set workers=3")

# Every Kubernetes object, the chart's rendered too, against the Kubernetes API's schemas
# (kubernetes-models from npm, which scripts/setup.sh installs in build/npm).
modules = os.path.join(root, "build", "npm", "node_modules")
if not os.path.exists(os.path.join(modules, "kubernetes-models", "package.json")):
    fail("k8s schemas", "kubernetes-models is not installed in build/npm (scripts/setup.sh installs it)")
else:
    objects = [("k8s/sloserve.yaml", d) for d in yaml.safe_load_all(open(os.path.join(deploy, "k8s", "sloserve.yaml")))
               if d] + [("helm/sloserve/" + name, d) for name, text in render_helm(chart)[0]
                        for d in yaml.safe_load_all(text) if d]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(objects, f)
    r = subprocess.run(["node", os.path.join(root, "tests", "deploy", "validate_k8s.mjs"), f.name, modules],
                       capture_output=True, text=True)
    os.unlink(f.name)
    if r.returncode != 0:
        fail("k8s schemas", (r.stdout + r.stderr).strip()[-800:])

# Compose: the image's entrypoint is sloserve.
compose = yaml.safe_load(open(os.path.join(deploy, "compose.yaml")))
cluster = check_cluster_file(open(os.path.join(deploy, "compose-cluster.yaml")).read(), "compose-cluster.yaml")
for name, svc in compose["services"].items():
    if svc.get("image") == "sloserve":
        check_command(svc["command"], "compose.yaml " + name, cluster)

# Prometheus for compose: a configuration promtool accepts, aimed at /metrics of every node.
prom = os.path.join(deploy, "prometheus", "prometheus.yml")
r = subprocess.run(["promtool", "check", "config", prom], capture_output=True, text=True)
if r.returncode != 0:
    fail("prometheus/prometheus.yml", "promtool check config: " + (r.stderr or r.stdout).strip()[-300:])
targets = {t for job in yaml.safe_load(open(prom))["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
for name, node in (cluster or {}).items():
    if not any("%s:%d" % (name, p) in targets for p in metrics_ports(node)):
        fail("prometheus/prometheus.yml", "scrapes no /metrics port of node %s (%s)" % (name, sorted(metrics_ports(node))))
for t in targets:
    host, port = t.rsplit(":", 1)
    if host not in (cluster or {}) or int(port) not in metrics_ports(cluster[host]):
        fail("prometheus/prometheus.yml", "target %s is no node's /metrics" % t)

# The Grafana dashboard: its queries parse and name only series sloserve exports.
dashboard = json.load(open(os.path.join(deploy, "grafana", "sloserve.json")))
exported = set(re.findall(r'"(sloserve_[a-z_]+)"', open(os.path.join(root, "actors", "metrics.cpp")).read()))
exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
if not exprs:
    fail("grafana/sloserve.json", "no panel queries anything")
for e in exprs:
    for series in re.findall(r"\bsloserve_\w+", e):
        if series not in exported and re.sub(r"_(bucket|sum|count)$", "", series) not in exported:
            fail("grafana/sloserve.json", "queries %s, which sloserve does not export" % series)
with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
    yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [{"record": "panel:%d" % i, "expr": e}
                                                              for i, e in enumerate(exprs)]}]}, f)
r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
os.unlink(f.name)
if r.returncode != 0:
    fail("grafana/sloserve.json", "a query does not parse: " + (r.stderr or r.stdout).strip()[-300:])

# The Dockerfile's entrypoint and default command; it exposes what the pods expose; the build
# context leaves a host's build tree out.
docker = open(os.path.join(deploy, "Dockerfile")).read()
exposed = {int(p) for line in re.findall(r"^EXPOSE (.*)$", docker, re.M) for p in line.split()}
if container_ports - exposed:
    fail("Dockerfile", "EXPOSE leaves out ports the pods serve: %s" % sorted(container_ports - exposed))
ignore = open(os.path.join(root, ".dockerignore")).read().split() if os.path.exists(os.path.join(root, ".dockerignore")) else []
if "build/" not in ignore and "build" not in ignore:
    fail(".dockerignore", "does not leave build/ out of the image's context")
entry = re.search(r'^ENTRYPOINT \["([^"]+)"\]', docker, re.M)
cmd = re.search(r"^CMD (\[.*\])", docker, re.M)
if not entry or not entry.group(1).endswith("sloserve"):
    fail("Dockerfile", "the entrypoint is not sloserve")
elif cmd:
    check_command(yaml.safe_load(cmd.group(1)), "Dockerfile CMD", None)

# The runtime image installs the packages that hold every library of the binary's ldd closure:
# deploy/runtime-packages.sh finds a package for each (none missing), and the Dockerfile's runtime
# stage installs what it lists.
ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
if "not found" in ldd:
    fail("sloserve", "ldd finds no file for: " + ", ".join(l.split()[0] for l in ldd.splitlines() if "not found" in l))
r = subprocess.run(["bash", os.path.join(deploy, "runtime-packages.sh"), binary], capture_output=True, text=True)
if r.returncode != 0:
    fail("runtime-packages.sh", (r.stderr or r.stdout).strip()[-300:])
listed = set(r.stdout.split())
for pkg in ("libgrpc++1.51", "libzmq5", "libcaf-core0.17"):  # what an image once lacked, and the core
    if r.returncode == 0 and pkg not in listed:
        fail("runtime-packages.sh", "does not list %s, which the binary links" % pkg)
if "runtime-packages.sh build/sloserve > build/runtime-packages" not in docker or \
        "xargs -a /tmp/runtime-packages apt-get install" not in docker:
    fail("Dockerfile", "the runtime stage does not install what deploy/runtime-packages.sh lists")

# The systemd unit.
unit = open(os.path.join(deploy, "sloserve-node@.service")).read()
exec_start = re.search(r"^ExecStart=(\S+) (.*)$", unit, re.M)
check_command(exec_start.group(2).replace("%i", "w1").split(), "sloserve-node@.service", None)

print("\n".join(failures) or "every deployment file runs commands sloserve accepts")
sys.exit(1 if failures else 0)
