"""The spec's introduction example (chapter 1): a model trained from a poptorch.DataLoader
with deviceIterations(10), switching optimizer with setOptimizer once the smoothed loss
falls below 0.1, against the same loop in PyTorch on the CPU."""

import copy

import torch

import poptorch


class ExampleDataset(torch.utils.data.Dataset):
    """The example's dataset (the spec does not print it): y = x / 2 with noise."""

    def __init__(self, shape, length):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(length, *shape, generator=generator)
        self.y = self.x / 2 + 0.01 * torch.randn(length, *shape, generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


class ExampleModelWithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1, 1)
        self.loss = torch.nn.MSELoss()

    def forward(self, x, target=None):
        fc = self.fc(x)
        if self.training:
            return fc, self.loss(fc, target)
        return fc


def test_the_introduction_example_trains_as_pytorch_does():
    torch.manual_seed(0)
    model = ExampleModelWithLoss()
    model.train()
    reference = copy.deepcopy(model)
    dataset = ExampleDataset(shape=[1], length=20000)

    # the example as the spec prints it
    opts = poptorch.Options()
    opts.deviceIterations(10)
    training_data = poptorch.DataLoader(options=opts, dataset=dataset, batch_size=10,
                                        shuffle=True, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.001)
    poptorch_model = poptorch.trainingModel(model, options=opts, optimizer=optimizer)
    torch.manual_seed(1)  # the shuffle
    momentum_loss, losses, switched_at = None, [], None
    for batch, target in training_data:
        assert batch.shape == (100, 1)  # batch_size x deviceIterations
        _, loss = poptorch_model(batch, target)
        losses.append(loss)
        momentum_loss = loss if momentum_loss is None else momentum_loss * 0.95 + loss * 0.05
        if momentum_loss < 0.1 and switched_at is None:
            switched_at = len(losses)
            poptorch_model.setOptimizer(torch.optim.AdamW(model.parameters(), lr=0.0001))

    # the same data on the CPU: one step per micro-batch of 10, the call's last loss
    cpu_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.001)
    torch.manual_seed(1)
    sampler = torch.utils.data.DataLoader(dataset, batch_size=100, shuffle=True,
                                          drop_last=True)
    expected = []
    for batch, target in sampler:
        if len(expected) == switched_at:
            break
        for x, y in zip(batch.split(10), target.split(10), strict=True):
            cpu_optimizer.zero_grad()
            _, loss = reference(x, y)
            loss.backward()
            cpu_optimizer.step()
        expected.append(loss.detach())
    assert switched_at is not None and 5 < switched_at < len(losses)
    torch.testing.assert_close(torch.stack(losses[:switched_at]), torch.stack(expected),
                               rtol=1e-4, atol=1e-5)
    assert losses[-1] < 0.01  # training went on with the new optimizer's lr
    assert poptorch_model.options.device_iterations == 10
