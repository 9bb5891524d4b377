"""A PopDist-style training script: run it alone or with the launcher, unchanged.

    python examples/popdist_training.py                       # one process, 4 replicas
    poptorch-run --num-instances 2 --num-replicas 4 examples/popdist_training.py
    torchrun --nproc-per-node 2 examples/popdist_training.py  # one replica per process

It is written as scripts for Graphcore's PopRun and PopDist are: when a launcher started
it (`popdist.isPopdistEnvSet()`), `popdist.poptorch.Options()` gives each instance its
replicas and process id, `poptorch.DataLoader` reads this instance's share of the data
(`auto_distributed_partitioning`, with the same `randomSeed` everywhere), only instance 0
logs and writes the checkpoint (`popdist.execute_on_instances`). A small MLP learns
scikit-learn's handwritten digits; each instance prints a checksum of its final weights.
"""

import argparse
import logging

import torch
from sklearn.datasets import load_digits

import popdist
import popdist.poptorch
import poptorch


class DigitsMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, 10))
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, images, labels=None):
        logits = self.layers(images)
        if labels is None:
            return logits.argmax(-1)
        return logits.argmax(-1), self.loss(logits, labels)


def create_options(args) -> poptorch.Options:
    if popdist.isPopdistEnvSet():
        opts = popdist.poptorch.Options()  # replicas and process id from the launcher
    else:
        opts = poptorch.Options().replicationFactor(args.num_replicas)
    opts.randomSeed(args.seed)  # the same shuffle on every instance
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    return opts


def log_once(message: str) -> None:
    if not popdist.isPopdistEnvSet() or popdist.getInstanceIndex() == 0:
        logging.info(message)


def main(args) -> None:
    instance = popdist.getInstanceIndex() if popdist.isPopdistEnvSet() else 0
    digits = load_digits()
    images = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target)
    train = torch.utils.data.TensorDataset(images[:1440], labels[:1440])
    torch.manual_seed(args.seed)
    model = DigitsMLP()
    opts = create_options(args)
    loader = poptorch.DataLoader(opts, train, batch_size=args.batch_size, shuffle=True,
                                 auto_distributed_partitioning=True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    training = poptorch.trainingModel(model, opts, optimizer=optimizer)
    for epoch in range(args.epochs):
        for x, y in loader:
            _, loss = training(x, y)
        log_once(f"epoch {epoch}: loss {float(loss.mean()):.4f}")
    training.destroy()  # free the instance's device for the inference model

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"instance {instance}: weights checksum {checksum:.6f}", flush=True)
    if args.checkpoint and popdist.isPopdistEnvSet():
        popdist.execute_on_instances({0}, torch.save, model.state_dict(), args.checkpoint)
    elif args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)

    model.eval()
    inference = poptorch.inferenceModel(model, poptorch.Options())
    predicted = inference(images[1440:])
    accuracy = float((predicted == labels[1440:]).float().mean())
    log_once(f"held-out accuracy {accuracy:.3f}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--gradient-accumulation", type=int, default=2)
    parser.add_argument("--num-replicas", type=int, default=None,
                        help="replicas of all processes (default 4; a launcher sets it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", help="write the trained weights here (once)")
    arguments = parser.parse_args()
    if popdist.isPopdistEnvSet():
        popdist.init()
        if arguments.num_replicas not in (None, popdist.getNumTotalReplicas()):
            parser.error(f"--num-replicas {arguments.num_replicas}: the launcher runs "
                         f"{popdist.getNumTotalReplicas()} replicas; set them there")
    elif arguments.num_replicas is None:
        arguments.num_replicas = 4
    main(arguments)
