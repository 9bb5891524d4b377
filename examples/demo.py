"""The main job: a small CNN classifier run by poptorch-mlir on the IPU machine model.

It wraps the model with `poptorch.inferenceModel` (4 device iterations x 2 replicas),
runs one batch, compares the result with PyTorch on the CPU and prints what the
machine model reports so far: the compile phases, the ipu ops of the compiled program
and the readable program the JIT generated.
"""

import collections
import re
import time

import torch

import poptorch


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, images):
        logits = self.head(torch.flatten(self.features(images), 1))
        return logits.softmax(-1).argmax(-1), logits


def main() -> None:
    torch.manual_seed(0)
    model = Classifier().eval()
    opts = poptorch.Options().deviceIterations(4).replicationFactor(2)
    ipu_model = poptorch.inferenceModel(model, opts)
    # 4 iterations x 2 replicas x micro-batch 8, brightness varying across the batch
    images = torch.randn(4 * 2 * 8, 3, 16, 16) + torch.linspace(-2, 2, 64).view(-1, 1, 1, 1)

    start = time.perf_counter()
    classes, logits = ipu_model(images)
    first_call = time.perf_counter() - start
    start = time.perf_counter()
    ipu_model(images)
    second_call = time.perf_counter() - start

    with torch.no_grad():
        cpu_classes, cpu_logits = model(images)
    print(f"batch of {images.shape[0]} images: 4 device iterations x 2 replicas x 8")
    print("predicted classes (first 16):", classes[:16].tolist())
    print("same classes as PyTorch on CPU:", bool((classes == cpu_classes).all()))
    print(f"max |logits - PyTorch|: {(logits - cpu_logits).abs().max().item():.2e}")

    compiled = ipu_model._compiled
    print(f"\nfirst call (capture + compile + run): {first_call:.2f} s, "
          f"second call: {second_call * 1000:.1f} ms")
    print("compile phases (ms):", {k: round(v * 1000, 1) for k, v in compiled.timings.items()})
    memory = ipu_model.getMemoryEstimate().ipus[0]
    by_class = ", ".join(f"{name} {size:,} B" for name, size in memory.classes.items() if size)
    print(f"machine model (GC200): {ipu_model.cycleCount():,} cycles a call, compute latency "
          f"{ipu_model.getComputeLatency()[2] * 1e6:.1f} us per iteration, memory on IPU 0 "
          f"{memory.total / 2**20:.2f} MiB ({by_class})")
    ops = collections.Counter(re.findall(r'"(ipu\.\w+)"', compiled.module_text))
    print(f"ipu ops in the compiled program ({sum(ops.values())}):", dict(ops.most_common()))
    source = compiled.program.source.splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith("def main"))
    print("\nthe program the JIT generated (first lines of main):")
    print("\n".join(source[start:start + 10]))


if __name__ == "__main__":
    main()
