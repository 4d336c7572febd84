#!/usr/bin/python3
"""Starts every shipped deployment as its files say and serves load through it.

For deploy/compose.yaml, deploy/k8s/sloserve.yaml and the Helm chart rendered with its default
values and with `--set workers=3`: each container (compose service, Kubernetes pod) runs in a network namespace of its own,
joined to the others by a bridge, with the names the deployment gives resolved there as Docker's
or Kubernetes' DNS would (`ip netns exec` reads /etc/netns/NAME/hosts): compose services by their
name, Kubernetes Services and StatefulSet pods by their DNS names. Each runs the command its
container runs, with the cluster file the deployment mounts. Then, from a client namespace: the
readiness probe the files declare answers 200 at the pod's address, and `sloserve load` sends
through the frontend the file names, with nothing lost.

    start_deployments.py SLOSERVE_BIN SOURCE_DIR

Needs root (as in CI); exits 77 (skipped) where network namespaces cannot be made.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helm_render import render_helm  # noqa: E402

binary, root = sys.argv[1], sys.argv[2]
deploy = os.path.join(root, "deploy")
tag = "sd%d" % os.getpid()
hub = tag + "-hub"
failures = []


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class pod:
    """One container: its name, its command's arguments, its labels and its DNS names."""

    def __init__(self, name, args, labels=None, config_path=None):
        self.name, self.args, self.labels = name, args, labels or {}
        self.config_path = config_path  # where the container reads the cluster file
        self.names = set()
        self.ip = None
        self.ns = None


def compose_pods():
    compose = yaml.safe_load(open(os.path.join(deploy, "compose.yaml")))
    cluster = open(os.path.join(deploy, "compose-cluster.yaml")).read()
    pods = []
    for name, svc in compose["services"].items():
        if svc.get("image") != "sloserve":
            continue
        mount = next(v.split(":")[1] for v in svc.get("volumes", []) if "compose-cluster.yaml" in v)
        p = pod(name, [str(a) for a in svc["command"]], config_path=mount)
        p.names.add(name)  # compose's DNS: the service name
        pods.append(p)
    return cluster, pods


def kubernetes_pods(docs):
    docs = [d for d in docs if d]
    cluster = next(d["data"]["cluster.yaml"] for d in docs if d["kind"] == "ConfigMap" and "cluster.yaml" in d["data"])
    pods = []
    for d in docs:
        if d["kind"] not in ("Deployment", "StatefulSet"):
            continue
        spec = d["spec"]
        replicas = int(spec.get("replicas", 1))
        labels = spec["template"]["metadata"].get("labels", {})
        c = spec["template"]["spec"]["containers"][0]
        mount = next(m["mountPath"] for m in c.get("volumeMounts", []) if m.get("subPath") == "cluster.yaml")
        for i in range(replicas):
            name = d["metadata"]["name"] + "-" + str(i)
            args = [str(a).replace("$(POD_NAME)", name) for a in c.get("command", [])[1:] + c.get("args", [])]
            p = pod(name, args, labels, mount)
            if d["kind"] == "StatefulSet":
                ns = d["metadata"].get("namespace", "default")
                svc = spec["serviceName"]
                p.names |= {"%s.%s" % (name, svc), "%s.%s.%s.svc.cluster.local" % (name, svc, ns)}
            pods.append(p)
    # A Service's names resolve to the pods it selects (a headless one's to each pod; the one
    # pod here stands for a ClusterIP's).
    for d in docs:
        if d["kind"] != "Service":
            continue
        ns = d["metadata"].get("namespace", "default")
        svc = d["metadata"]["name"]
        selected = [p for p in pods if all(p.labels.get(k) == v for k, v in d["spec"].get("selector", {}).items())]
        if selected:
            selected[0].names |= {svc, "%s.%s" % (svc, ns), "%s.%s.svc" % (svc, ns), "%s.%s.svc.cluster.local" % (svc, ns)}
    return cluster, pods


def in_ns(ns, args, **kw):
    return subprocess.Popen(["ip", "netns", "exec", ns] + args, **kw)


def network(pods, client):
    """A namespace per pod and one for the client, on one bridge, each with the hosts file."""
    sh("ip", "netns", "add", hub)
    sh("ip", "-n", hub, "link", "set", "lo", "up")
    sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", hub, "link", "set", "br0", "up")
    hosts = "127.0.0.1 localhost\n"
    for i, p in enumerate(pods + [client]):
        p.ns = "%s-%d" % (tag, i)
        p.ip = "10.78.0.%d" % (i + 1)
        sh("ip", "netns", "add", p.ns)
        sh("ip", "link", "add", "%s-v%d" % (tag, i), "type", "veth", "peer", "name", "h%d" % i, "netns", hub)
        sh("ip", "link", "set", "%s-v%d" % (tag, i), "netns", p.ns, "name", "eth0")
        sh("ip", "-n", p.ns, "addr", "add", p.ip + "/24", "dev", "eth0")
        sh("ip", "-n", p.ns, "link", "set", "eth0", "up")
        sh("ip", "-n", p.ns, "link", "set", "lo", "up")
        sh("ip", "-n", hub, "link", "set", "h%d" % i, "master", "br0", "up")
        if p.names:
            hosts += "%s %s\n" % (p.ip, " ".join(sorted(p.names)))
    for p in pods + [client]:
        os.makedirs("/etc/netns/" + p.ns, exist_ok=True)
        with open("/etc/netns/%s/hosts" % p.ns, "w") as f:
            f.write(hosts)


def teardown(pods):
    for p in pods:
        if p.ns:
            sh("ip", "netns", "del", p.ns, check=False)
            shutil.rmtree("/etc/netns/" + p.ns, ignore_errors=True)
    sh("ip", "netns", "del", hub, check=False)


def probe(client, url):
    """GET `url` from the client's namespace: the status, or None."""
    code = ("import sys, urllib.request\n"
            "try:\n"
            "    print(urllib.request.urlopen(sys.argv[1], timeout=2).status)\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n"
            "except Exception:\n"
            "    print(0)\n")
    r = subprocess.run(["ip", "netns", "exec", client.ns, "/usr/bin/python3", "-c", code, url],
                       capture_output=True, text=True)
    out = r.stdout.strip()
    return int(out) if out.isdigit() else None


def run(where, cluster_text, pods):
    d = tempfile.mkdtemp(prefix="sloserve-deploy-")
    client = pod("client", [])
    procs = []
    try:
        path = os.path.join(d, "cluster.yaml")
        with open(path, "w") as f:
            f.write(cluster_text)
        cluster = yaml.safe_load(cluster_text)
        network(pods, client)
        for p in pods:
            # The container's command, with the cluster file where the deployment mounts it.
            args = [path if a == p.config_path else a for a in p.args]
            log = open(os.path.join(d, p.name + ".log"), "w")
            procs.append((p, in_ns(p.ns, [binary] + args, stdout=log, stderr=subprocess.STDOUT)))
        # The readiness probe, at the frontend pod's address on the ingress's port.
        frontend = next(n for n in cluster["nodes"] if "frontend" in n.get("roles", []))
        front_pod = next(p for p in pods if "--name" in p.args and p.args[p.args.index("--name") + 1] == frontend["name"])
        port = int(frontend["http"].rsplit(":", 1)[1])
        status = None
        for _ in range(60):
            status = probe(client, "http://%s:%d/v2/health/ready" % (front_pod.ip, port))
            if status == 200:
                break
            time.sleep(0.5)
        if status != 200:
            raise RuntimeError("the readiness probe never answered 200 (last: %s)" % status)
        for p, proc in procs:
            if proc.poll() is not None:
                raise RuntimeError("%s exited %d" % (p.name, proc.returncode))
        # Load from the client's namespace: over ZeroMQ to the frontend the file names, and over
        # KServe v2 HTTP to the frontend pod's ingress.
        pipeline = cluster["pipelines"][0]["name"]
        for protocol, extra in (("zmq", []), ("http", ["--address", "%s:%d" % (front_pod.ip, port)])):
            out = os.path.join(d, "load-%s.json" % protocol)
            r = subprocess.run(["ip", "netns", "exec", client.ns, binary, "--log-level", "warn", "load", "-c", path,
                                "--pipeline", pipeline, "--rate", "20", "--duration", "4", "--warmup", "1",
                                "--protocol", protocol, "--json", out] + extra,
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError("load over %s exits %d: %s" % (protocol, r.returncode, (r.stderr or r.stdout)[-500:]))
            s = json.load(open(out))
            print("%s over %s: %s" % (where, protocol,
                                      {k: s[k] for k in ("sent", "ok", "ok_within_slo", "dropped", "errors", "lost")}))
            if s["lost"] != 0 or s["sent"] == 0 or s["ok"] < 0.9 * s["sent"]:
                raise RuntimeError("load over %s: sent %d, ok %d, lost %d" % (protocol, s["sent"], s["ok"], s["lost"]))
    except Exception as e:  # noqa: BLE001 - every failure is reported with the nodes' logs
        logs = ""
        for p in pods:
            lp = os.path.join(d, p.name + ".log")
            if os.path.exists(lp):
                logs += "--- %s\n%s\n" % (p.name, open(lp).read()[-1500:])
        failures.append("%s: %s\n%s" % (where, e, logs))
    finally:
        for p, proc in procs:
            proc.terminate()
        for p, proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        teardown(pods + [client])
        shutil.rmtree(d, ignore_errors=True)


if os.getuid() != 0 or sh("ip", "netns", "add", tag + "-try", check=False).returncode != 0:
    print("SKIP: needs root and network namespaces")
    sys.exit(77)
sh("ip", "netns", "del", tag + "-try", check=False)

run("compose.yaml", *compose_pods())
run("k8s/sloserve.yaml", *kubernetes_pods(list(yaml.safe_load_all(open(os.path.join(deploy, "k8s", "sloserve.yaml"))))))
for overrides, where in (({}, "helm/sloserve (default values)"), ({"workers": 3}, "helm/sloserve --set workers=3")):
    rendered, _, unrendered = render_helm(os.path.join(deploy, "helm", "sloserve"), overrides)
    if unrendered:
        failures += ["helm/%s: %s" % u for u in unrendered]
        break
    run(where, *kubernetes_pods([doc for _, text in rendered for doc in yaml.safe_load_all(text)]))

print("\n".join(failures) or "every deployment starts, is ready and serves load with nothing lost")
sys.exit(1 if failures else 0)
