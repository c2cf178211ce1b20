"""MNIST-style convolutional classifier trained with Adadelta and StepLR, in the shape of pytorch/examples.

Nothing is downloaded: the data are synthetic 28x28 digit-like images (one noisy template per class).
Written for PyTorch; runs unmodified with ``import munet as torch`` (the only line that differs).
"""

import argparse

import munet as torch

nn = torch.nn
F = torch.nn.functional
optim = torch.optim
StepLR = torch.optim.lr_scheduler.StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_mnist(n, generator):
    """``n`` images of shape (1, 28, 28), normalized like MNIST, and their labels 0..9."""
    templates = (torch.rand(10, 1, 28, 28, generator=generator) > 0.7).float()
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = templates[labels] + 0.3 * torch.randn(n, 1, 28, 28, generator=generator)
    return (images - 0.1307) / 0.3081, labels


def train(model, data, target, optimizer, batch_size, log_interval):
    model.train()
    losses = []
    for batch_idx in range(data.shape[0] // batch_size):
        x = data[batch_idx * batch_size : (batch_idx + 1) * batch_size]
        y = target[batch_idx * batch_size : (batch_idx + 1) * batch_size]
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if log_interval and batch_idx % log_interval == 0:
            print(f"train batch {batch_idx}\tloss {loss.item():.6f}")
    return losses


def test(model, data, target):
    model.eval()
    with torch.no_grad():
        output = model(data)
        loss = F.nll_loss(output, target, reduction="sum").item() / data.shape[0]
        correct = output.argmax(dim=1, keepdim=True).eq(target.view_as(output.argmax(dim=1, keepdim=True))).sum()
    return loss, correct.item() / data.shape[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description="MNIST-style example (synthetic data)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-size", type=int, default=640)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    data, target = synthetic_mnist(args.train_size + 200, generator)
    model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    losses = []
    for epoch in range(1, args.epochs + 1):
        losses += train(
            model, data[: args.train_size], target[: args.train_size], optimizer, args.batch_size, args.log_interval
        )
        test_loss, accuracy = test(model, data[args.train_size :], target[args.train_size :])
        print(f"epoch {epoch}: test loss {test_loss:.4f}, accuracy {accuracy:.3f}, lr {scheduler.get_last_lr()[0]:.3f}")
        scheduler.step()
    return {"losses": losses, "test_loss": test_loss, "accuracy": accuracy, "lr": scheduler.get_last_lr()[0]}


if __name__ == "__main__":
    main()
