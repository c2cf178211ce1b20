"""The real models of issue 14, written in PyTorch as their authors write them.

ResNet-18 (torchvision's layout, without torchvision), a MobileNetV3-style net (depthwise
convolutions, hardswish, squeeze-excitation, bilinear upsampling), a transformer encoder, a small
vision transformer, a stacked LSTM and a bidirectional GRU. ``tests/onnx/test_real_models.py``
exports each with ``torch.onnx.export`` and compares MuNet's import with onnxruntime;
``benchmarks/onnx_resnet.py`` times the ResNet-18.
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(scale))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, expanded: int, cout: int, stride: int):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(cin, expanded, 1, bias=False), nn.BatchNorm2d(expanded), nn.Hardswish())
        self.depthwise = nn.Sequential(
            nn.Conv2d(expanded, expanded, 3, stride, 1, groups=expanded, bias=False),
            nn.BatchNorm2d(expanded),
            nn.Hardswish(),
        )
        self.se = SqueezeExcite(expanded, max(8, expanded // 4))
        self.project = nn.Sequential(nn.Conv2d(expanded, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        out = self.project(self.se(self.depthwise(self.expand(x))))
        return x + out if self.residual else out


class MobileNetStyle(nn.Module):
    """MobileNetV3-small's building blocks with a segmentation-style head that upsamples bilinearly."""

    def __init__(self, num_classes: int = 5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 32, 16, 1),
            InvertedResidual(16, 48, 24, 2),
            InvertedResidual(24, 72, 24, 1),
        )
        self.head = nn.Conv2d(24, num_classes, 1)

    def forward(self, x):
        logits = self.head(self.blocks(self.stem(x)))
        return nn.functional.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


class TransformerEncoderModel(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 32, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(1, 16, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        return self.out(self.encoder(x))


class VisionTransformer(nn.Module):
    def __init__(self, image: int = 32, patch: int = 8, width: int = 48, heads: int = 3, depth: int = 2):
        super().__init__()
        self.patchify = nn.Conv2d(3, width, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.position = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, width) * 0.02)
        layer = nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=96, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        patches = self.patchify(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), patches], dim=1) + self.position
        return self.head(self.norm(self.encoder(tokens))[:, 0])


class StackedLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=3, batch_first=True)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.out(y)


class BidirectionalGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 12, num_layers=2, bidirectional=True)
        self.out = nn.Linear(24, 3)

    def forward(self, x):
        y, h = self.gru(x)
        return self.out(y), h


def randomize_batch_norm(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Non-trivial running statistics, so that folding BatchNorm into a convolution is exercised."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.copy_(torch.rand(module.num_features, generator=generator) - 0.5)
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
            module.bias.data.copy_(torch.rand(module.num_features, generator=generator) - 0.5)
    return model


def models() -> dict:
    """name -> (model in eval mode, example inputs as a tuple of torch tensors)."""
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    return {
        "resnet18": (randomize_batch_norm(ResNet18(), generator).eval(), (torch.randn(2, 3, 64, 64),)),
        "mobilenet_style": (randomize_batch_norm(MobileNetStyle(), generator).eval(), (torch.randn(2, 3, 32, 32),)),
        "transformer_encoder": (TransformerEncoderModel().eval(), (torch.randint(0, 50, (2, 12)),)),
        "vision_transformer": (VisionTransformer().eval(), (torch.randn(2, 3, 32, 32),)),
        "stacked_lstm": (StackedLSTM().eval(), (torch.randn(2, 7, 8),)),
        "bidirectional_gru": (BidirectionalGRU().eval(), (torch.randn(6, 2, 8),)),
    }


def export(model: nn.Module, inputs: tuple, opset_version: int = 18, **options) -> bytes:
    """``torch.onnx.export`` at ``opset_version`` (the TorchScript exporter, as from_torch uses);
    ``options`` go to it (``do_constant_folding=False`` keeps BatchNormalization nodes)."""
    import io

    buffer = io.BytesIO()
    fastpath = torch.backends.mha.get_fastpath_enabled()
    # eval-mode transformer layers otherwise take a fused fast path that ONNX cannot express
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        _export(model, inputs, buffer, opset_version, options)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return buffer.getvalue()


def _export(model, inputs, buffer, opset_version, options):
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            inputs,
            buffer,
            opset_version=opset_version,
            input_names=[f"input_{i}" for i in range(len(inputs))],
            dynamo=False,
            **options,
        )
