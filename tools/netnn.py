#!/usr/bin/python3
"""NetNN's data, model and quantization, with fixed seeds (no data set or model hub here).

Run with Debian's interpreter (it has python3-torch and numpy):
    /usr/bin/python3 tools/netnn.py --out build/netnn [--flows 1000]

The covert-channel data set of the thesis (seed 004, P6.2.1: 1,000 flows of video calls, half of
them carrying covert data through Facet or DeltaShaper) is not available, so this writes a
synthetic one with the same shape: UDP/RTP flows of a video call (two classes, `benign` and
`covert`) whose packets differ, in distribution only, in their sizes and timing:

- benign: frames of 1-9 packets at 30 frames/s; packet sizes from a video encoder (most near the
  MTU, the last of a frame shorter, log-normal); gaps within a frame of 40-200 us, between frames
  the frame interval with 2 ms of jitter;
- covert: the same call with data modulated into it: sizes more uniform over 300-1,200 bytes
  (the encoder's output replaced by the covert stream's), frames of 2-6 packets, gaps within a
  frame more regular and longer (90-130 us).

Headers are real IPv4/UDP/RTP (addresses, ports, TTL, lengths, identification, RTP sequence
numbers and timestamps) followed by random payload bytes; the first 68 bytes of each packet are
what the model sees, with the minimum and maximum inter-arrival times of its flow so far (as
features.hpp computes them). Inference points are the flow's packets 1, 2, 4, ..., 1024.

It trains the model of the thesis's Figure P6.1 in float (Conv1d 32 filters of 8 bits with stride
8, max pool 2; Conv1d 64 filters of 3, max pool 3; dense 50, 100, 2), quantizes it to 8-bit
weights and activations with one power-of-two rescale per layer (a shift), and writes:
- model.json: the quantized model (gpu/netnn/model.hpp's format);
- test.bin: the test flows' packets, each 68 header bytes, the arrival time (int64 us, little
  endian) and the flow's class (1 byte), flow after flow;
- meta.json: the float model's and the quantized model's accuracy on the test flows (per packet
  at inference points, and per flow by majority), and the data's parameters.
"""
import argparse
import json
import os

import numpy as np
import torch

HEAD = 68
POINTS = [1 << k for k in range(11)]  # 1, 2, 4, ..., 1024


def flow_packets(rng, covert, n):
    """Sizes (bytes) and arrival times (us) of a flow's first n packets."""
    sizes, times = [], []
    t = float(rng.integers(0, 1_000_000))
    while len(sizes) < n:
        frame = int(rng.integers(2, 7)) if covert else int(rng.integers(1, 10))
        for k in range(frame):
            if covert:
                size = int(rng.uniform(300, 1200))
                gap = rng.uniform(90, 130)
            else:
                size = int(min(1200, rng.lognormal(6.9, 0.25))) if k + 1 < frame else int(rng.uniform(200, 1200))
                gap = rng.uniform(40, 200)
            sizes.append(max(60, size))
            times.append(t)
            t += gap
        t += 33_333 - 100 * frame + rng.normal(0, 2000)
    return np.array(sizes[:n]), np.array(times[:n], dtype=np.int64)


def headers(rng, covert, sizes, times):
    """The first 68 bytes of each packet: IPv4, UDP, RTP, payload."""
    n = len(sizes)
    h = np.zeros((n, HEAD), dtype=np.uint8)
    src = rng.integers(0, 256, 4)
    dst = rng.integers(0, 256, 4)
    sport, dport = int(rng.integers(1024, 65536)), int(rng.integers(1024, 65536))
    ttl = int(rng.choice([64, 128])) - int(rng.integers(0, 20))
    ident = int(rng.integers(0, 65536))
    seq = int(rng.integers(0, 65536))
    ssrc = rng.integers(0, 256, 4)
    pt = 96 + int(rng.integers(0, 32))
    for i in range(n):
        total = int(sizes[i])
        b = h[i]
        b[0], b[1] = 0x45, 0
        b[2], b[3] = total >> 8, total & 0xFF
        idn = (ident + i) & 0xFFFF
        b[4], b[5] = idn >> 8, idn & 0xFF
        b[6], b[7] = 0x40, 0
        b[8], b[9] = ttl, 17
        b[10], b[11] = rng.integers(0, 256, 2)  # checksum
        b[12:16], b[16:20] = src, dst
        b[20], b[21], b[22], b[23] = sport >> 8, sport & 0xFF, dport >> 8, dport & 0xFF
        ulen = total - 20
        b[24], b[25] = ulen >> 8, ulen & 0xFF
        b[26], b[27] = rng.integers(0, 256, 2)
        s = (seq + i) & 0xFFFF
        ts = int(times[i] * 90 // 1000) & 0xFFFFFFFF  # 90 kHz clock
        b[28], b[29] = 0x80, pt
        b[30], b[31] = s >> 8, s & 0xFF
        b[32:36] = [(ts >> 24) & 0xFF, (ts >> 16) & 0xFF, (ts >> 8) & 0xFF, ts & 0xFF]
        b[36:40] = ssrc
        b[40:] = rng.integers(0, 256, HEAD - 40)
    return h


def log_time(us):
    """features.hpp's log_time, vectorised."""
    us = np.asarray(us, dtype=np.int64)
    out = np.where(us < 8, us, 0)
    big = us >= 8
    msb = np.zeros_like(us)
    msb[big] = np.floor(np.log2(us[big])).astype(np.int64)
    v = (msb - 2) * 8 + ((us >> np.maximum(msb - 3, 0)) & 7)
    out = np.where(big, np.minimum(v, 255), out)
    return np.where(us == 0xFFFFFFFF, 255, out).astype(np.uint8)


def point_inputs(head, times):
    """Inputs (bits) at the flow's inference points."""
    gaps = np.diff(times)
    gaps = np.clip(gaps, 0, 0xFFFFFFFE)
    rows = []
    for p in POINTS:
        i = p - 1
        if i >= len(times):
            break
        if p == 1:
            lo, hi = 0xFFFFFFFF, 0xFFFFFFFF
        else:
            lo, hi = gaps[:i].min(), gaps[:i].max()
        tail = np.array([log_time(lo), log_time(hi)], dtype=np.uint8)
        rows.append(np.unpackbits(np.concatenate([head[i], tail])))
    return np.array(rows, dtype=np.uint8)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(1, 32, 8, stride=8)
        self.c2 = torch.nn.Conv1d(32, 64, 3)
        self.d1 = torch.nn.Linear(64 * 11, 50)
        self.d2 = torch.nn.Linear(50, 100)
        self.d3 = torch.nn.Linear(100, 2)

    def forward(self, x, trace=None):
        a1 = torch.relu(self.c1(x))
        p1 = torch.nn.functional.max_pool1d(a1, 2)
        a2 = torch.relu(self.c2(p1))
        p2 = torch.nn.functional.max_pool1d(a2, 3)
        f = p2.flatten(1)
        a3 = torch.relu(self.d1(f))
        a4 = torch.relu(self.d2(a3))
        if trace is not None:
            trace.extend([a1, a2, a3, a4])
        return self.d3(a4)


def quantize(net, calibration):
    """8-bit weights, 8-bit activations, a shift per layer (model.hpp's arithmetic)."""
    trace = []
    with torch.no_grad():
        net(calibration, trace)
    layers = [net.c1, net.c2, net.d1, net.d2, net.d3]
    out = []
    s_in = 1.0  # bits
    for k, layer in enumerate(layers):
        w = layer.weight.detach().numpy().astype(np.float64)
        b = layer.bias.detach().numpy().astype(np.float64)
        s_w = max(np.abs(w).max(), 1e-12) / 127
        wq = np.clip(np.round(w / s_w), -128, 127).astype(np.int64)
        acc_scale = s_in * s_w
        bq = np.round(b / acc_scale).astype(np.int64)
        entry = {"inputs": int(w.shape[1]), "outputs": int(w.shape[0]), "weights": wq.flatten().tolist(),
                 "bias": bq.tolist()}
        if k < 2:
            entry.update(kind="conv", kernel=int(w.shape[2]), stride=int(layer.stride[0]), pool=2 if k == 0 else 3)
        else:
            entry["kind"] = "dense"
        if k < 4:
            # The output scale: a power of two times the accumulator's that covers what calibration saw.
            peak = float(np.percentile(trace[k].numpy(), 99.9)) if trace[k].numel() else 1.0
            shift = max(0, int(np.ceil(np.log2(max(peak, 1e-9) / (255 * acc_scale)))))
            entry["shift"] = shift
            s_in = acc_scale * (1 << shift)
        else:
            entry["shift"] = 0
        out.append(entry)
    return {"input_channels": 1, "input_length": HEAD * 8 + 16, "layers": out}


def reference(model, x):
    """model.cpp's reference, vectorised over rows of x."""
    a = x.astype(np.int64).reshape(len(x), 1, -1)
    for k, l in enumerate(model["layers"]):
        w = np.array(l["weights"], dtype=np.int64)
        b = np.array(l["bias"], dtype=np.int64)
        last = k + 1 == len(model["layers"])
        if l["kind"] == "conv":
            w = w.reshape(l["outputs"], l["inputs"], l["kernel"])
            n, c, length = a.shape
            positions = (length - l["kernel"]) // l["stride"] + 1
            idx = np.arange(positions)[:, None] * l["stride"] + np.arange(l["kernel"])[None, :]
            win = a[:, :, idx]  # n, c, positions, kernel
            acc = np.einsum("ncpk,fck->nfp", win, w) + b[None, :, None]
            q = np.clip(acc >> l["shift"], 0, 255)
            pooled = positions // l["pool"]
            a = q[:, :, : pooled * l["pool"]].reshape(n, l["outputs"], pooled, l["pool"]).max(axis=3)
        else:
            w = w.reshape(l["outputs"], l["inputs"])
            acc = a.reshape(len(a), -1) @ w.T + b[None, :]
            if last:
                return acc
            a = np.clip(acc >> l["shift"], 0, 255).reshape(len(a), -1, 1)
    return a


def flow_accuracy(pred, labels, flows):
    """Per flow, the majority of its inference points (ties: class 0) against its class."""
    right = 0
    for f in np.unique(flows):
        sel = flows == f
        votes = np.bincount(pred[sel], minlength=2)
        right += int(np.argmax(votes) == labels[sel][0])
    return right / len(np.unique(flows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--packets", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=12)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(2406)
    torch.manual_seed(2406)
    xs, ys, fs, test_packets = [], [], [], []
    n_test = a.flows // 5
    for f in range(a.flows):
        covert = f % 2 == 1
        sizes, times = flow_packets(rng, covert, a.packets)
        head = headers(rng, covert, sizes, times)
        rows = point_inputs(head, times)
        xs.append(rows)
        ys.append(np.full(len(rows), int(covert)))
        fs.append(np.full(len(rows), f))
        if f >= a.flows - n_test:
            test_packets.append((head, times, int(covert)))
    x, y, flows = np.concatenate(xs), np.concatenate(ys), np.concatenate(fs)
    test = flows >= a.flows - n_test
    xt = torch.tensor(x[~test], dtype=torch.float32).unsqueeze(1)
    yt = torch.tensor(y[~test])
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    for epoch in range(a.epochs):
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    net.eval()
    xv = torch.tensor(x[test], dtype=torch.float32).unsqueeze(1)
    with torch.no_grad():
        float_pred = net(xv).argmax(1).numpy()
    model = quantize(net, xt[:2000])
    q_pred = np.argmax(reference(model, x[test]), axis=1)
    yv, fv = y[test], flows[test]
    meta = {
        "flows": a.flows, "test_flows": n_test, "packets_per_flow": a.packets, "seed": 2406,
        "float_packet_accuracy": float((float_pred == yv).mean()),
        "float_flow_accuracy": flow_accuracy(float_pred, yv, fv),
        "quantized_packet_accuracy": float((q_pred == yv).mean()),
        "quantized_flow_accuracy": flow_accuracy(q_pred, yv, fv),
    }
    with open(os.path.join(a.out, "model.json"), "w") as out:
        json.dump(model, out)
    with open(os.path.join(a.out, "meta.json"), "w") as out:
        json.dump(meta, out, indent=1)
    with open(os.path.join(a.out, "test.bin"), "wb") as out:
        for head, times, label in test_packets:
            rec = np.zeros((len(times), HEAD + 9), dtype=np.uint8)
            rec[:, :HEAD] = head
            rec[:, HEAD:HEAD + 8] = times.astype("<i8").view(np.uint8).reshape(-1, 8)
            rec[:, HEAD + 8] = label
            out.write(rec.tobytes())
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
