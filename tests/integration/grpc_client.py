#!/usr/bin/python3
"""The KServe v2 gRPC ingress of a real multi-process cluster (`sloserve up`, ephemeral ports),
spoken to by a Python client generated from messages/grpc_service.proto with grpcio-tools, as
any client of the protocol would be.

usage: grpc_client.py SLOSERVE_BIN SOURCE_DIR
"""

import array
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from multiprocessing import shared_memory

import grpc
import yaml
from grpc_tools import protoc

SLOSERVE, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
WORK = tempfile.mkdtemp(prefix="sloserve-grpc-")

# Stubs from the same proto the server is built from.
assert protoc.main(["protoc", "-I" + os.path.join(SOURCE, "messages"), "--python_out=" + WORK,
                    "--grpc_python_out=" + WORK, "grpc_service.proto"]) == 0
sys.path.insert(0, WORK)
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402

with open(os.path.join(SOURCE, "tests", "integration", "two_stage.yaml")) as f:
    TWO_STAGE = f.read().replace("runtime: {", "runtime: {max_payload_bytes: 1048576, ")

NODES = """cluster: {name: grpc}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], grpc: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
"""

IMAGE = array.array("f", [(i % 17) / 17 for i in range(3 * 32 * 32)])


class Cluster:
    """`sloserve up` on a cluster file in its own folder, and a channel to its gRPC ingress."""

    def __init__(self, name, extra="", tls=False, token=None, slo_ms=None):
        self.dir = os.path.join(WORK, name)
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "cluster.yaml")
        pipelines = TWO_STAGE if slo_ms is None else TWO_STAGE.replace("slo_ms: 200", "slo_ms: %d" % slo_ms)
        with open(self.path, "w") as f:
            f.write(NODES + pipelines + extra)
        self.tls, self.token = tls, token

    def run(self, *args):
        return subprocess.run(list(args), cwd=self.dir, capture_output=True, text=True, timeout=60)

    def start(self):
        self.log = open(os.path.join(self.dir, "up.log"), "w+")
        self.up = subprocess.Popen([SLOSERVE, "up", "-c", self.path, "--write-config",
                                    os.path.join(self.dir, "resolved.yaml")],
                                   stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(self.log.name) as f:
                text = f.read()
            if "cluster up" in text:
                break
            assert self.up.poll() is None, text
            time.sleep(0.05)
        with open(os.path.join(self.dir, "resolved.yaml")) as f:
            resolved = yaml.safe_load(f)
        self.address = [n for n in resolved["nodes"] if n["name"] == "ctl"][0]["grpc"]
        assert not self.address.endswith(":0"), "up resolves the grpc port"
        if self.tls:
            with open(os.path.join(self.dir, "cert.pem"), "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self.channel = grpc.secure_channel(self.address, creds)
        else:
            self.channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        return self

    def wait_ready(self):
        for _ in range(200):
            try:
                if self.stub.ServerReady(pb.ServerReadyRequest(), timeout=2).ready:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
        with open(self.log.name) as f:
            raise AssertionError("never ready: " + f.read())

    def stop(self):
        self.channel.close()
        self.up.terminate()
        self.up.wait(timeout=30)
        self.log.close()


def infer_request(shape=(3, 32, 32), raw=True, rid="", name="input", datatype="FP32"):
    t = pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=list(shape))
    r = pb.ModelInferRequest(model_name="traffic", id=rid, inputs=[t])
    if raw:
        r.raw_input_contents.append(IMAGE.tobytes())
    else:
        r.inputs[0].contents.fp32_contents.extend(IMAGE)
    return r


class GrpcIngress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster("plain").start()
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()

    def test_health_and_metadata(self):
        s = self.c.stub
        self.assertTrue(s.ServerLive(pb.ServerLiveRequest()).live)
        # gRPC's health checking (grpc.health.v1.Health), as Kubernetes' gRPC probes call it:
        # HealthCheckRequest{service} in, HealthCheckResponse{status: SERVING = 1} out.
        check = self.c.channel.unary_unary("/grpc.health.v1.Health/Check",
                                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for _ in range(40):  # the ingress asks the frontend every 500 ms
            if check(b"") == b"\x08\x01":
                break
            time.sleep(0.1)
        self.assertEqual(check(b""), b"\x08\x01")
        name = b"inference.GRPCInferenceService"
        self.assertEqual(check(b"\x0a" + bytes([len(name)]) + name), b"\x08\x01")
        with self.assertRaises(grpc.RpcError) as e:
            check(b"\x0a\x04nope")
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(s.ServerMetadata(pb.ServerMetadataRequest()).name, "sloserve")
        m = s.ModelMetadata(pb.ModelMetadataRequest(name="traffic"))
        self.assertEqual(m.name, "traffic")
        self.assertEqual((m.inputs[0].name, m.inputs[0].datatype, list(m.inputs[0].shape)),
                         ("input", "FP32", [3, 32, 32]))
        # One row per classify invocation (fan-out 1.5): [-1, 10].
        self.assertEqual((m.outputs[0].name, list(m.outputs[0].shape)), ("output", [-1, 10]))
        # Beside it the rows of each item a batched reply carries; the platform as the configuration's.
        self.assertEqual([(o.name, o.datatype, list(o.shape)) for o in m.outputs[1:]], [("output_rows", "INT64", [])])
        self.assertEqual(m.platform, "ensemble")
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="traffic")).ready)
        with self.assertRaises(grpc.RpcError) as e:
            s.ModelReady(pb.ModelReadyRequest(name="nope"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_triton_statistics_and_repository_index(self):
        s = self.c.stub
        self.assertIn("statistics", list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions))
        before = s.ModelStatistics(pb.ModelStatisticsRequest(name="traffic")).model_stats[0].inference_count
        for _ in range(3):
            s.ModelInfer(infer_request())
        stats = s.ModelStatistics(pb.ModelStatisticsRequest(name="traffic", version="1"))
        self.assertEqual(len(stats.model_stats), 1)
        m = stats.model_stats[0]
        self.assertEqual((m.name, m.version), ("traffic", "1"))
        self.assertEqual(m.inference_count, before + 3)
        self.assertGreaterEqual(m.inference_stats.success.count, 3)
        self.assertGreater(m.inference_stats.compute_infer.ns, 0)
        self.assertGreater(m.last_inference, 1700000000000)
        self.assertGreaterEqual(len(s.ModelStatistics(pb.ModelStatisticsRequest()).model_stats), 1)
        with self.assertRaises(grpc.RpcError) as e:
            s.ModelStatistics(pb.ModelStatisticsRequest(name="nope"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        index = s.RepositoryIndex(pb.RepositoryIndexRequest())
        states = {m.name: (m.version, m.state) for m in index.models}
        self.assertEqual(states["traffic"], ("1", "READY"))
        for m in s.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models:
            self.assertEqual(m.state, "READY")
        # Triton's model configuration: the pipeline as an ensemble of its stages' models.
        c = s.ModelConfig(pb.ModelConfigRequest(name="traffic")).config
        self.assertEqual((c.name, c.platform, c.max_batch_size), ("traffic", "ensemble", 1024))
        self.assertEqual((c.input[0].name, c.input[0].data_type, list(c.input[0].dims)),
                         ("input", pb.TYPE_FP32, [3, 32, 32]))
        self.assertEqual(list(c.output[0].dims), [-1, 10])
        self.assertEqual((c.output[1].name, c.output[1].data_type), ("output_rows", pb.TYPE_INT64))
        self.assertEqual([st.model_name for st in c.ensemble_scheduling.step], ["det", "cls"])
        self.assertEqual(c.parameters["slo_ms"].string_value, "200")
        with self.assertRaises(grpc.RpcError) as e:
            s.ModelConfig(pb.ModelConfigRequest(name="traffic", version="9"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_inference_with_raw_and_typed_contents(self):
        r = self.c.stub.ModelInfer(infer_request(rid="q1"))
        self.assertEqual((r.model_name, r.id), ("traffic", "q1"))
        # The server's timing, in all and per stage.
        self.assertGreater(r.parameters["sloserve_total_us"].int64_param, 0)
        self.assertGreater(r.parameters["sloserve_stage_detect_compute_us"].int64_param, 0)
        # One output, the classify invocations (fan-out 1.5) stacked: [k, 10].
        self.assertEqual(len(r.outputs), 1)
        self.assertEqual(len(r.raw_output_contents), 1)
        o, raw = r.outputs[0], r.raw_output_contents[0]
        self.assertEqual((o.name, o.datatype, len(o.shape), o.shape[1]), ("output", "FP32", 2, 10))
        self.assertEqual(len(raw), 40 * o.shape[0])
        # Typed contents, and a client that batches says [1, ...] and gets [1, k, 10] back.
        b = self.c.stub.ModelInfer(infer_request(shape=(1, 3, 32, 32), raw=False))
        self.assertEqual(len(b.outputs), 1)
        self.assertEqual((b.outputs[0].shape[0], b.outputs[0].shape[2]), (1, 10))
        # A batch of two: two queries answered as one, [2, K, 10] and each item's rows beside.
        two = infer_request(shape=(2, 3, 32, 32))
        two.raw_input_contents[0] = IMAGE.tobytes() * 2
        t = self.c.stub.ModelInfer(two)
        self.assertEqual([o.name for o in t.outputs], ["output", "output_rows"])
        self.assertEqual((t.outputs[0].shape[0], t.outputs[0].shape[2]), (2, 10))
        self.assertEqual((t.outputs[1].datatype, list(t.outputs[1].shape)), ("INT64", [2]))
        rows = struct.unpack("<2q", t.raw_output_contents[1])
        self.assertEqual(t.outputs[0].shape[1], max(rows))
        # The classification extension: the output asked as its top 3 classes, "VALUE:INDEX" strings
        # (length-prefixed in the raw contents), highest first; 0 classes is refused.
        classes = infer_request()
        classes.outputs.add(name="output").parameters["classification"].int64_param = 3
        c = self.c.stub.ModelInfer(classes)
        self.assertEqual((c.outputs[0].datatype, c.outputs[0].shape[-1]), ("BYTES", 3))
        raw, got = c.raw_output_contents[0], []
        while raw:
            n = struct.unpack("<I", raw[:4])[0]
            got.append(raw[4:4 + n].decode())
            raw = raw[4 + n:]
        self.assertEqual(len(got), 3 * c.outputs[0].shape[0])
        values = [float(x.split(":")[0]) for x in got[:3]]
        self.assertEqual(values, sorted(values, reverse=True))
        self.assertTrue(all(0 <= int(x.split(":")[1]) < 10 for x in got))
        none = infer_request()
        none.outputs.add(name="output").parameters["classification"].int64_param = 0
        with self.assertRaises(grpc.RpcError) as e:
            self.c.stub.ModelInfer(none)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_the_clients_mistakes_get_the_right_code_and_the_node_keeps_serving(self):
        wrong_count = infer_request()
        wrong_count.raw_input_contents.append(b"extra")
        unknown = infer_request()
        unknown.model_name = "nope"
        oversize = infer_request()
        oversize.raw_input_contents[0] = bytes(2 << 20)
        unknown_output = infer_request()
        unknown_output.outputs.add().name = "plate"
        unknown_version = infer_request()
        unknown_version.model_version = "2"
        # Strings (BYTES contents) where the model takes an image: read, then refused by shape.
        strings = pb.ModelInferRequest(model_name="traffic")
        strings.inputs.add(name="input", datatype="BYTES", shape=[2]).contents.bytes_contents.extend([b"ab", b""])
        torn = pb.ModelInferRequest(model_name="traffic")
        torn.inputs.add(name="input", datatype="BYTES", shape=[2])
        torn.raw_input_contents.append(b"\x02\0\0\0ab\x09\0\0\0")
        cases = [
            (unknown_output, grpc.StatusCode.INVALID_ARGUMENT, "no output 'plate'"),
            (unknown_version, grpc.StatusCode.NOT_FOUND, "no version '2'"),
            (infer_request(shape=(3, 16, 64)), grpc.StatusCode.INVALID_ARGUMENT, "float32[3,32,32]"),
            (infer_request(name="pixels"), grpc.StatusCode.INVALID_ARGUMENT, "no input 'pixels'"),
            (infer_request(datatype="BF16"), grpc.StatusCode.INVALID_ARGUMENT, "datatype 'BF16'"),
            (infer_request(datatype="INT32"), grpc.StatusCode.INVALID_ARGUMENT, "int32[3,32,32] does not match"),
            (wrong_count, grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents has 2 entries for 1 inputs"),
            (strings, grpc.StatusCode.INVALID_ARGUMENT, "bytes[2] does not match"),
            (torn, grpc.StatusCode.INVALID_ARGUMENT, "4-byte little-endian length"),
            (unknown, grpc.StatusCode.NOT_FOUND, "unknown pipeline 'nope'"),
            (oversize, grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
        ]
        for request, code, says in cases:
            with self.assertRaises(grpc.RpcError) as e:
                self.c.stub.ModelInfer(request, timeout=10)
            self.assertEqual(e.exception.code(), code, e.exception.details())
            self.assertIn(says, e.exception.details())
        self.assertGreaterEqual(len(self.c.stub.ModelInfer(infer_request()).outputs), 1)
        # The version metadata lists, and the output the signature names, are taken.
        named = infer_request()
        named.model_version = "1"
        named.outputs.add().name = "output"
        self.assertGreaterEqual(len(self.c.stub.ModelInfer(named).outputs), 1)

    def test_shared_memory_is_off_unless_the_file_turns_it_on(self):
        s = self.c.stub
        self.assertNotIn("system_shared_memory", list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions))
        with self.assertRaises(grpc.RpcError) as e:
            s.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="r", key="/x", byte_size=8))
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("runtime.client_shared_memory", e.exception.details())
        # The load client says so, the code by its name, and exits 1.
        done = self.c.run(SLOSERVE, "load", "-c", os.path.join(self.c.dir, "resolved.yaml"), "--pipeline", "traffic",
                          "--rate", "10", "--duration", "1", "--protocol", "grpc", "--shared-memory")
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("gRPC FAILED_PRECONDITION: shared memory is off on this node", done.stderr)

    def test_many_requests_in_flight_each_get_exactly_one_reply(self):
        # A burst of 300 at once, past what one emulated device serves within the SLO: each gets
        # one reply, served or dropped with a reason. How many are served depends on how fast this
        # client submits and on what else the machine runs (on 2 cores: 33 alone, 12 beside the
        # other tests), so the test asks for some, not a count.
        futures = [self.c.stub.ModelInfer.future(infer_request(rid=str(i)), timeout=30) for i in range(300)]
        served, refused = [], []
        for f in futures:
            try:
                served.append(int(f.result().id))
            except grpc.RpcError as e:
                self.assertIn(e.code(), (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED), e.details())
                self.assertTrue(e.details())
                refused.append(e.code())
        self.assertEqual(len(served) + len(refused), 300)
        self.assertEqual(len(set(served)), len(served))
        self.assertGreater(len(served), 0)
        self.assertGreaterEqual(len(self.c.stub.ModelInfer(infer_request()).outputs), 1)

    def test_a_stream_answers_every_request_once_and_says_why_it_refused_one(self):
        # 40 requests on one stream, one of them for a pipeline the cluster lacks: 40 replies, each
        # naming its request; the refused one carries the reason and the stream goes on.
        def requests():
            for i in range(40):
                r = infer_request(rid="s%d" % i)
                if i == 7:
                    r.model_name = "nope"
                yield r
        replies = list(self.c.stub.ModelStreamInfer(requests(), timeout=30))
        self.assertEqual(len(replies), 40)
        ids = sorted(int(r.infer_response.id[1:]) for r in replies)
        self.assertEqual(ids, list(range(40)))
        errors = {r.infer_response.id: r.error_message for r in replies if r.error_message}
        self.assertIn("unknown pipeline 'nope'", errors.pop("s7"))
        # 39 at once are more than one emulated device serves within the SLO: those it drops say
        # so (as test_many_requests_in_flight's), and most are served.
        for why in errors.values():
            self.assertIn("drop", why)
        self.assertGreater(len(replies) - 1 - len(errors), 20, errors)
        for r in replies:
            if not r.error_message:
                self.assertEqual(r.infer_response.model_name, "traffic")
                self.assertGreaterEqual(len(r.infer_response.outputs), 1)
        # A stream closed with nothing sent ends at once; the node still serves.
        self.assertEqual(list(self.c.stub.ModelStreamInfer(iter([]), timeout=10)), [])
        self.assertGreaterEqual(len(self.c.stub.ModelInfer(infer_request()).outputs), 1)

    def test_log_settings_are_read_and_changed(self):
        s = self.c.stub
        now = s.LogSettings(pb.LogSettingsRequest()).settings
        self.assertEqual(now["log_verbose_level"].uint32_param, 0)
        self.assertTrue(now["log_info"].bool_param)
        self.assertIn("logging", list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions))
        log = os.path.join(self.c.dir, "logs", "frontend.log")
        change = pb.LogSettingsRequest()
        change.settings["log_file"].string_param = log
        change.settings["log_verbose_level"].uint32_param = 1
        after = s.LogSettings(change).settings
        self.assertEqual((after["log_file"].string_param, after["log_verbose_level"].uint32_param), (log, 1))
        bad = pb.LogSettingsRequest()
        bad.settings["log_error"].bool_param = False
        with self.assertRaises(grpc.RpcError) as e:
            s.LogSettings(bad)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("at or above one level", e.exception.details())
        back = pb.LogSettingsRequest()
        back.settings["log_file"].string_param = ""
        back.settings["log_verbose_level"].uint32_param = 0
        s.LogSettings(back)
        self.assertTrue(os.path.exists(log), "the log file was opened with its folder")

    def test_trace_settings_and_traces(self):
        s = self.c.stub
        self.assertIn("trace", list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions))
        path = os.path.join(self.c.dir, "traces", "grpc.jsonl")
        on = pb.TraceSettingRequest()
        on.settings["trace_level"].value.append("TIMESTAMPS")
        on.settings["trace_rate"].value.append("1")
        on.settings["trace_file"].value.append(path)
        got = s.TraceSetting(on).settings
        self.assertEqual(list(got["trace_rate"].value), ["1"])
        for i in range(3):
            s.ModelInfer(infer_request(rid="traced%d" % i))
        off = pb.TraceSettingRequest()
        off.settings["trace_level"].value.append("OFF")
        s.TraceSetting(off)
        import json
        with open(path) as f:
            traces = [json.loads(line) for line in f]
        self.assertGreaterEqual(len(traces), 3)
        self.assertTrue(all(t["pipeline"] == "traffic" and t["stages"] for t in traces))
        unknown = pb.TraceSettingRequest(model_name="nope")
        with self.assertRaises(grpc.RpcError) as e:
            s.TraceSetting(unknown)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        bad = pb.TraceSettingRequest()
        bad.settings["trace_level"].value.append("TENSORS")
        with self.assertRaises(grpc.RpcError) as e:
            s.TraceSetting(bad)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_the_load_client_speaks_grpc(self):
        out = os.path.join(self.c.dir, "load.json")
        done = self.c.run(SLOSERVE, "load", "-c", os.path.join(self.c.dir, "resolved.yaml"), "--pipeline", "traffic",
                          "--rate", "150", "--duration", "2", "--protocol", "grpc", "--json", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        import json
        with open(out) as f:
            s = json.load(f)
        self.assertEqual(s["lost"], 0)
        self.assertGreaterEqual(s["sent"], 200)
        self.assertGreaterEqual(s["attainment"], 0.99, s)


class GrpcSecurity(unittest.TestCase):
    def test_tls_and_a_bearer_token(self):
        # Its one inference comes right after readiness, over CURVE between the nodes: a 2 s SLO
        # keeps this test about security, not about the first request's latency (once in about a
        # dozen runs on 2 cores it took the whole 200 ms before its second stage).
        c = Cluster("secure", "security: {keys: keys, tls_cert: cert.pem, tls_key: key.pem, tokens: [token]}\n",
                    tls=True, slo_ms=2000)
        self.assertEqual(c.run(SLOSERVE, "keys", "-c", c.path).returncode, 0)
        made = c.run(shutil.which("openssl") or "/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                     "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                     "-keyout", "key.pem", "-out", "cert.pem")
        self.assertEqual(made.returncode, 0, made.stderr)
        with open(os.path.join(c.dir, "token"), "w") as f:
            f.write("grpc-s3cret-token-for-tests\n")
        c.start()
        try:
            c.wait_ready()  # the health RPCs need no token
            with self.assertRaises(grpc.RpcError) as e:
                c.stub.ModelInfer(infer_request())
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("Bearer token is required", e.exception.details())
            with self.assertRaises(grpc.RpcError) as e:
                c.stub.ModelInfer(infer_request(), metadata=[("authorization", "Bearer wrong")])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            r = c.stub.ModelInfer(infer_request(), metadata=[("authorization", "Bearer grpc-s3cret-token-for-tests")])
            self.assertGreaterEqual(len(r.outputs), 1)
            # A stream needs the token as well.
            with self.assertRaises(grpc.RpcError) as e:
                list(c.stub.ModelStreamInfer(iter([infer_request()]), timeout=10))
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            streamed = list(c.stub.ModelStreamInfer(iter([infer_request(rid="t")]), timeout=10,
                                                    metadata=[("authorization", "Bearer grpc-s3cret-token-for-tests")]))
            self.assertEqual([x.infer_response.id for x in streamed], ["t"])
            # Plaintext on the TLS port gets nowhere.
            plain = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(c.address))
            with self.assertRaises(grpc.RpcError):
                plain.ServerLive(pb.ServerLiveRequest(), timeout=2)
        finally:
            c.stop()


class GrpcSharedMemory(unittest.TestCase):
    def test_inputs_and_outputs_through_system_shared_memory(self):
        c = Cluster("shm", slo_ms=2000)
        with open(c.path) as f:
            text = f.read().replace("runtime: {", "runtime: {client_shared_memory: true, ")
        with open(c.path, "w") as f:
            f.write(text)
        c.start()
        region = shared_memory.SharedMemory(create=True, size=1 << 17)
        try:
            c.wait_ready()
            s = c.stub
            self.assertIn("system_shared_memory", list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions))
            image = IMAGE.tobytes()
            region.buf[4096:4096 + len(image)] = image
            key = "/" + region.name
            s.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="in", key=key, offset=4096,
                                                                              byte_size=len(image)))
            s.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="out", key=key, offset=65536,
                                                                              byte_size=16384))
            listed = s.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions
            self.assertEqual(sorted(listed.keys()), ["in", "out"])
            self.assertEqual((listed["in"].key, listed["in"].offset, listed["in"].byte_size), (key, 4096, len(image)))

            # The classify stage runs once or twice a query (fanout 1.5): both sizes of answer.
            answers = {}
            for _ in range(8):
                raw_out = s.ModelInfer(infer_request()).raw_output_contents[0]
                answers[len(raw_out)] = raw_out
                if len(answers) == 2:
                    break
            r = infer_request(raw=False)
            r.inputs[0].ClearField("contents")
            p = r.inputs[0].parameters
            p["shared_memory_region"].string_param = "in"
            p["shared_memory_byte_size"].int64_param = len(image)
            out = r.outputs.add(name="output")
            out.parameters["shared_memory_region"].string_param = "out"
            out.parameters["shared_memory_byte_size"].int64_param = 16384
            got = s.ModelInfer(r)
            self.assertEqual(len(got.raw_output_contents), 0)
            o = got.outputs[0]
            self.assertEqual(o.parameters["shared_memory_region"].string_param, "out")
            n = o.parameters["shared_memory_byte_size"].int64_param
            self.assertIn(n, answers)
            self.assertEqual(bytes(region.buf[65536:65536 + n]), answers[n])

            p["shared_memory_region"].string_param = "nope"
            with self.assertRaises(grpc.RpcError) as e:
                s.ModelInfer(r)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("no shared-memory region 'nope'", e.exception.details())
            with self.assertRaises(grpc.RpcError) as e:
                s.CudaSharedMemoryRegister(pb.CudaSharedMemoryRegisterRequest(name="g", raw_handle=b"x", byte_size=8))
            # Where the node maps GPU memory (a CUDA device), the 1-byte handle is refused; else
            # every CUDA call answers why it cannot.
            if "cuda_shared_memory" in list(s.ServerMetadata(pb.ServerMetadataRequest()).extensions):
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("cudaIpcMemHandle_t has 64", e.exception.details())
            else:
                self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
                self.assertIn("CUDA shared memory is unavailable on this node: no CUDA", e.exception.details())
                with self.assertRaises(grpc.RpcError) as e:
                    s.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest())
                self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            s.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
            self.assertEqual(len(s.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions), 0)
            self.assertGreaterEqual(len(s.ModelInfer(infer_request()).outputs), 1)

            # The load client over gRPC registers one region, names it in every request, and
            # unregisters it when done.
            out = os.path.join(c.dir, "load.json")
            done = c.run(SLOSERVE, "load", "-c", os.path.join(c.dir, "resolved.yaml"), "--pipeline", "traffic",
                         "--rate", "100", "--duration", "2", "--protocol", "grpc", "--shared-memory", "--json", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            import json
            with open(out) as f:
                summary = json.load(f)
            self.assertEqual((summary["lost"], summary["errors"]), (0, 0), summary)
            self.assertGreaterEqual(summary["attainment"], 0.99, summary)
            self.assertEqual(len(s.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions), 0)
        finally:
            region.close()
            region.unlink()
            c.stop()


if __name__ == "__main__":
    try:
        unittest.main(argv=[sys.argv[0], "-v"])
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
