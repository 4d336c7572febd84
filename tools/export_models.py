#!/usr/bin/python3
"""Writes TorchScript models for sloserve into a build folder, with fixed seeds.

Run with Debian's interpreter (it has python3-torch and python3-torchvision):
    /usr/bin/python3 tools/export_models.py --out build/models [--small] [--variants N]

--small writes only the small models the tests use (seconds). Each comes with a reference batch:
NAME.input.bin and NAME.output.bin hold float32 rows computed here, so C++ tests can check the
executor against PyTorch itself. Among them, ResNet-18 cut at several layers (resnet18_from_P.pt
runs layers [P, end) of one network; NAME.shape holds what it takes).

Without --small it also writes ResNet-18, -34, -50, -101 and -152, MobileNetV2 and SqueezeNet 1.1
(randomly initialised: there is no model hub; config/examples/variants-cpu.yaml serves them as
variants with their published ImageNet top-1) and N transfer-learned ResNet-18 variants that share one
backbone, both as full models and as one prefix plus per-variant suffixes.
"""
import argparse
import os
import sys

import torch


def save(module, example, path):
    module.eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, example)
    traced.save(path)
    return traced


def write_reference(traced, batch, stem):
    with torch.no_grad():
        out = traced(batch)
    batch.numpy().astype("float32").tofile(stem + ".input.bin")
    out.numpy().astype("float32").tofile(stem + ".output.bin")


class TinyMLP(torch.nn.Module):
    """float32[16] -> float32[4]."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class TinyCNN(torch.nn.Module):
    """float32[3, 8, 8] -> float32[5]."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.head = torch.nn.Linear(6, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.head(y)


class TinyDetector(torch.nn.Module):
    """float32[3, 32, 32] -> float32[16, 193]: a detector over a 4x4 grid of 8x8 cells. Each row is
    one candidate: column 0 its score (a sigmoid), then the cell's pixels as float32[3, 8, 8], the
    crop that tiny_cnn classifies. A pipeline fans out on the rows scoring above a threshold
    (`fanout: {from_output: ...}`)."""

    def __init__(self):
        super().__init__()
        self.score = torch.nn.Conv2d(3, 1, 8, stride=8)

    def forward(self, x):
        scores = torch.sigmoid(self.score(x)).reshape(-1, 16, 1)
        crops = x.reshape(-1, 3, 4, 8, 4, 8).permute(0, 2, 4, 1, 3, 5).reshape(-1, 16, 192)
        return torch.cat([scores, crops], dim=2)


def detector_pipeline_reference(detector, cnn, out):
    """tiny_detector's reference batch, and for its first image what the pipeline detect ->
    classify (tiny_cnn on every crop scoring above 0.5, in row order) answers."""
    batch = torch.randn(2, 3, 32, 32)
    write_reference(detector, batch, os.path.join(out, "tiny_detector"))
    with torch.no_grad():
        rows = detector(batch[:1])[0]
        crops = rows[rows[:, 0] > 0.5][:, 1:].reshape(-1, 3, 8, 8)
        cnn(crops).numpy().astype("float32").tofile(os.path.join(out, "tiny_detector.pipeline.bin"))


class SmallCNN(torch.nn.Module):
    """float32[3, 64, 64] -> float32[10]: a few milliseconds per batch on one CPU core, enough
    work for timing tests (profiles) to measure the model rather than the machine's noise."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


def preprocess_reference(out):
    """A 5x7 uint8 RGB image resized to 4x6 and normalized, as gpu/preprocess.hpp must do it."""
    g = torch.Generator().manual_seed(7)
    img = torch.randint(0, 256, (5, 7, 3), dtype=torch.uint8, generator=g)
    x = img.permute(2, 0, 1).unsqueeze(0).float()
    y = torch.nn.functional.interpolate(x, size=(4, 6), mode="bilinear", align_corners=False)[0]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    y = (y / 255.0 - mean) / std
    img.numpy().tofile(os.path.join(out, "preprocess.input.bin"))
    y.numpy().astype("float32").tofile(os.path.join(out, "preprocess.output.bin"))


def tiny_family(out):
    """A prefix float32[16] -> float32[8] and two 3-class suffixes; full variants for comparison."""
    torch.manual_seed(5)
    prefix = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    save(prefix, torch.zeros(1, 16), os.path.join(out, "tiny_prefix.pt"))
    for v in range(2):
        torch.manual_seed(50 + v)
        suffix = torch.nn.Linear(8, 3)
        save(suffix, torch.zeros(1, 8), os.path.join(out, "tiny_v%d_suffix.pt" % v))
        save(torch.nn.Sequential(prefix, suffix), torch.zeros(1, 16), os.path.join(out, "tiny_v%d.pt" % v))


# Where a mobile client may hand ResNet-18 over to the server (Graft's partition points): the
# index of the first top-level child the server runs, and what it receives.
RESNET18_SPLITS = (0, 4, 5, 6, 7, 8)


class BasicBlock(torch.nn.Module):
    """ResNet's two-convolution block (as torchvision's), without torchvision."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet18_layers():
    """ResNet-18's top-level layers in order: conv1 bn1 relu maxpool layer1-4 avgpool flatten fc."""
    nn = torch.nn
    stage = lambda cin, cout, stride: nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))
    return [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
            stage(64, 64, 1), stage(64, 128, 2), stage(128, 256, 2), stage(256, 512, 2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(512, 1000)]


def resnet18_fragments(out, side=64):
    """ResNet-18 (random weights, seed 0) as server fragments [p, end) for each split p:
    resnet18_from_P.pt, with a reference batch: the input is what layers [0, p) make of random
    images and the output is the whole network's on those images, so that a fragment is checked
    against the full model (within 1e-5)."""
    torch.manual_seed(0)
    layers = resnet18_layers()
    net = torch.nn.Sequential(*layers).eval()
    images = torch.randn(2, 3, side, side)
    with torch.no_grad():
        full_out = net(images)
    for p in RESNET18_SPLITS:
        head, tail = torch.nn.Sequential(*layers[:p]), torch.nn.Sequential(*layers[p:])
        with torch.no_grad():
            handed = head(images)
        save(tail, handed[:1], os.path.join(out, "resnet18_from_%d.pt" % p))
        stem = os.path.join(out, "resnet18_from_%d" % p)
        handed.numpy().astype("float32").tofile(stem + ".input.bin")
        full_out.numpy().astype("float32").tofile(stem + ".output.bin")
        with open(stem + ".shape", "w") as f:
            f.write(" ".join(str(d) for d in handed.shape[1:]) + "\n")
    # The same network as one file of blocks, one per split (a partitioned model, models[].layers):
    # a server runs any range of them. resnet18_blocks.shapes: what enters each block, a line each.
    cuts = list(RESNET18_SPLITS) + [len(layers)]
    blocks = torch.nn.Sequential(*[torch.nn.Sequential(*layers[a:b]) for a, b in zip(cuts, cuts[1:])])
    save(blocks, images[:1], os.path.join(out, "resnet18_blocks.pt"))
    with open(os.path.join(out, "resnet18_blocks.shapes"), "w") as f:
        x = images[:1]
        with torch.no_grad():
            for block in blocks:
                f.write(" ".join(str(d) for d in x.shape[1:]) + "\n")
                x = block(x)


def small(out):
    preprocess_reference(out)
    resnet18_fragments(out)
    tiny_family(out)
    torch.manual_seed(1234)
    mlp = save(TinyMLP(), torch.zeros(1, 16), os.path.join(out, "tiny_mlp.pt"))
    write_reference(mlp, torch.randn(3, 16), os.path.join(out, "tiny_mlp"))
    torch.manual_seed(7)
    cnn = SmallCNN()
    save(cnn, torch.zeros(1, 3, 64, 64), os.path.join(out, "small_cnn.pt"))
    # The same network traced at smaller input sizes: Jellyfish's zoo of one network at several
    # resolutions.
    for side in (32, 48):
        save(cnn, torch.zeros(1, 3, side, side), os.path.join(out, "small_cnn_%d.pt" % side))
    torch.manual_seed(99)
    cnn = save(TinyCNN(), torch.zeros(1, 3, 8, 8), os.path.join(out, "tiny_cnn.pt"))
    write_reference(cnn, torch.randn(4, 3, 8, 8), os.path.join(out, "tiny_cnn"))
    torch.manual_seed(5)
    detector = save(TinyDetector(), torch.zeros(1, 3, 32, 32), os.path.join(out, "tiny_detector.pt"))
    detector_pipeline_reference(detector, cnn, out)


def full(out, variants, only):
    import torchvision

    example = torch.zeros(1, 3, 224, 224)
    for name, ctor in [("resnet18", torchvision.models.resnet18), ("resnet34", torchvision.models.resnet34),
                       ("resnet50", torchvision.models.resnet50), ("resnet101", torchvision.models.resnet101),
                       ("resnet152", torchvision.models.resnet152),
                       ("mobilenet_v2", torchvision.models.mobilenet_v2),
                       ("squeezenet", torchvision.models.squeezenet1_1)]:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        net = ctor()
        save(net, example, os.path.join(out, name + ".pt"))
        if name == "mobilenet_v2":  # a zoo of input sizes for Jellyfish
            for side in (96, 128, 160):
                save(net, torch.zeros(1, 3, side, side), os.path.join(out, "%s_%d.pt" % (name, side)))
    if only and "variants" not in only:
        return
    # Transfer learning: one ResNet-18 backbone, a different 10-class head per variant.
    torch.manual_seed(0)
    backbone = torchvision.models.resnet18()
    backbone.fc = torch.nn.Identity()
    save(backbone, example, os.path.join(out, "resnet18_prefix.pt"))
    feature = torch.zeros(1, 512)
    for v in range(variants):
        torch.manual_seed(100 + v)
        head = torch.nn.Linear(512, 10)
        save(head, feature, os.path.join(out, "resnet18_v%d_suffix.pt" % v))
        save(torch.nn.Sequential(backbone, head), example, os.path.join(out, "resnet18_v%d.pt" % v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--variants", type=int, default=5)
    ap.add_argument("--only", default="", help="comma list of resnet18,resnet34,resnet50,resnet101,resnet152,mobilenet_v2,squeezenet,variants")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    small(args.out)
    if not args.small:
        full(args.out, args.variants, [x for x in args.only.split(",") if x])
    print("exported models to", args.out)


if __name__ == "__main__":
    sys.exit(main())
