"""The main job: train a small CNN on scikit-learn's handwritten digits with poptorch-mlir.

The model trains on the IPU machine model with `poptorch.trainingModel` (2 replicas,
gradient accumulation 2, 4 device iterations per call, poptorch.optim.Adam), then is
evaluated on held-out digits with `poptorch.inferenceModel` of the same module: the
trained weights move to it implicitly. The same model trained in PyTorch on the CPU with
the same data order gives the reference accuracy.
"""

import copy
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from tqdm import tqdm

import poptorch

MICRO_BATCH, ITERATIONS, REPLICAS, ACCUMULATION = 8, 4, 2, 2
EPOCHS = 15


class DigitsCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.classifier = torch.nn.Linear(32, 10)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, images, labels=None):
        logits = self.classifier(self.features(images))
        if labels is None:
            return logits.argmax(-1)
        return logits.argmax(-1), self.loss(logits, labels)


def load() -> tuple[torch.Tensor, ...]:
    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    labels = torch.tensor(digits.target)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    images, labels = images[order], labels[order]
    return images[:1400], labels[:1400], images[1400:], labels[1400:]


def main() -> None:
    torch.manual_seed(0)
    train_x, train_y, test_x, test_y = load()
    model = DigitsCNN()
    cpu_model = copy.deepcopy(model)

    opts = poptorch.Options().deviceIterations(ITERATIONS).replicationFactor(REPLICAS)
    opts.Training.gradientAccumulation(ACCUMULATION)
    optimizer = poptorch.optim.Adam(model.parameters(), lr=0.005)
    trainer = poptorch.trainingModel(model, opts, optimizer)
    loader = poptorch.DataLoader(opts, torch.utils.data.TensorDataset(train_x, train_y),
                                 batch_size=MICRO_BATCH, shuffle=True,
                                 generator=torch.Generator().manual_seed(1))
    steps = EPOCHS * len(loader)
    print(f"training on {len(train_y)} digits: {EPOCHS} epochs of {len(loader)} calls, each "
          f"{loader.combinedBatchSize} images ({ITERATIONS} iterations x {REPLICAS} replicas "
          f"x {ACCUMULATION} accumulated micro-batches of {MICRO_BATCH})")
    start = time.perf_counter()
    with tqdm(total=steps, unit="call", disable=None) as bar:
        for _ in range(EPOCHS):
            for images, labels in loader:
                _, loss = trainer(images, labels)
                bar.set_postfix(loss=f"{loss.mean().item():.3f}")
                bar.update()
    print(f"trained in {time.perf_counter() - start:.1f} s "
          f"(first call includes compilation), final loss {loss.mean().item():.4f}")
    memory = trainer.getMemoryEstimate().ipus[0]
    low, high, mean = trainer.getLatency()
    print(f"machine model (GC200), one call: {trainer.cycleCount():,} cycles "
          f"({trainer.getTimeline().total_seconds * 1e6:.1f} us), round-trip latency per "
          f"iteration {mean * 1e6:.1f} us (min {low * 1e6:.1f}, max {high * 1e6:.1f}), "
          f"memory on IPU 0 {memory.total / 2**20:.2f} of {memory.available / 2**20:.0f} MiB")

    evaluator = poptorch.inferenceModel(model)  # picks up the trained weights
    accuracy = (evaluator(test_x) == test_y).float().mean().item()
    print(f"accuracy on {len(test_y)} held-out digits (IPU machine model): {accuracy:.1%}")

    cpu_optimizer = torch.optim.Adam(cpu_model.parameters(), lr=0.005)
    cpu_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(train_x, train_y), batch_size=loader.combinedBatchSize,
        shuffle=True, generator=torch.Generator().manual_seed(1), drop_last=True)
    for _ in range(EPOCHS):
        for images, labels in cpu_loader:
            cpu_optimizer.zero_grad()
            for part_x, part_y in zip(images.reshape(-1, ACCUMULATION * REPLICAS, MICRO_BATCH,
                                                     1, 8, 8).unbind(0),
                                      labels.reshape(-1, ACCUMULATION * REPLICAS,
                                                     MICRO_BATCH).unbind(0), strict=True):
                for x, y in zip(part_x, part_y, strict=True):
                    (cpu_model(x, y)[1] / (ACCUMULATION * REPLICAS)).backward()
                cpu_optimizer.step()
                cpu_optimizer.zero_grad()
    cpu_model.eval()
    with torch.no_grad():
        cpu_accuracy = (cpu_model(test_x) == test_y).float().mean().item()
    print(f"accuracy of the same training in PyTorch on the CPU: {cpu_accuracy:.1%}")
    assert accuracy > 0.9, f"expected above 90% accuracy, got {accuracy:.1%}"


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
