#!/usr/bin/env python3
"""Writes the example CNNs, ResNet-50 and MobileNetV2, as ONNX models: defined here in PyTorch with random weights and
random BatchNorm statistics (no download), in inference mode, exported with torch.onnx.export's defaults (the
torch.export-based exporter). With --reference, also random inputs (NAME_in/x.npy) and PyTorch's outputs
(NAME_ref/y.npy) for `npusim run NAME.onnx --functional --inputs NAME_in --outputs OUT`.

Sizes: small (64 x 64 images, for tests) and full (224 x 224, the models' ImageNet shape); batch 1 unless --batch.
--keep-batchnorm exports with the TorchScript exporter without constant folding, which keeps every BatchNormalization
node (the default exporter folds them into the convolutions itself), so that npusim's fuse_conv does the folding.
Usage: make_cnns.py [--size small|full] [--batch N] [--models resnet50,mobilenetv2] [--out DIR] [--reference]
                    [--keep-batchnorm]"""
import argparse
import os

import numpy as np
import torch
from torch import nn

SIZES = {"small": 64, "full": 224}


def conv_bn(cin, cout, k, stride=1, groups=1, relu=True, relu6=False):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if relu6:
        layers.append(nn.ReLU6())
    elif relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Bottleneck(nn.Module):
    """ResNet-50's block: 1x1 reduce, 3x3 (the stride), 1x1 expand x4, the shortcut (a strided 1x1 projection where
    the shape changes), ReLU after the sum."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, cout, 1, relu=False))
        self.shortcut = conv_bn(cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion (ReLU6), 3x3 depthwise (ReLU6, the stride), linear 1x1 projection, the
    identity shortcut when the shape is kept."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [conv_bn(cin, hidden, 1, relu6=True)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, relu6=True), conv_bn(hidden, cout, 1, relu=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [conv_bn(3, 32, 3, 2, relu6=True)], 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                           (6, 320, 1, 1)):
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, relu6=True))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


MODELS = {"resnet50": ResNet50, "mobilenetv2": MobileNetV2}


def randomise(model):
    """Random BatchNorm statistics and affine terms (a fresh model's are 0 and 1, which would hide a folding bug),
    kept in a range where the activations stay O(1) through 50 layers."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=g) * 0.4 + 0.3)
            m.bias.data.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)


def export(name, size, out, reference, keep_batchnorm=False, batch=1):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    randomise(model)
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(2))
    path = os.path.join(out, f"{name}.onnx")
    if keep_batchnorm:
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamo=False, opset_version=17,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    else:
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"])
    if reference:
        with torch.no_grad():
            y = model(x)
        for sub, arr in ((f"{name}_in", x), (f"{name}_ref", y)):
            os.makedirs(os.path.join(out, sub), exist_ok=True)
            np.save(os.path.join(out, sub, "x.npy" if sub.endswith("_in") else "y.npy"), arr.numpy())
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--models", default="resnet50,mobilenetv2")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--keep-batchnorm", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        if name not in MODELS:
            ap.error(f"unknown model '{name}' (there are: {', '.join(MODELS)})")
        export(name, SIZES[args.size], args.out, args.reference, args.keep_batchnorm, args.batch)


if __name__ == "__main__":
    main()
