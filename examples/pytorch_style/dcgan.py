"""A small DCGAN in the shape of pytorch/examples' dcgan, trained a few steps on random "images".

Written for PyTorch; runs unmodified with ``import munet as torch`` (the only line that differs).
"""

import argparse

import munet as torch

nn = torch.nn
optim = torch.optim


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),  # -> 4x4
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),  # -> 8x8
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),  # -> 16x16
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # -> 8x8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # -> 4x4
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),  # -> 1x1
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def main(argv=None):
    parser = argparse.ArgumentParser(description="small DCGAN on random data")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--nz", type=int, default=16)
    parser.add_argument("--ngf", type=int, default=16)
    parser.add_argument("--ndf", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    nc = 3
    net_g = Generator(args.nz, args.ngf, nc)
    net_g.apply(weights_init)
    net_d = Discriminator(args.ndf, nc)
    net_d.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(args.batch_size, args.nz, 1, 1)
    optimizer_d = optim.Adam(net_d.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizer_g = optim.Adam(net_g.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    # "real" images: smooth random blobs in [-1, 1], which the generator has to learn to imitate
    real_pool = torch.tanh(torch.nn.functional.avg_pool2d(torch.randn(64, nc, 19, 19) * 3, 4, 1))

    history = {"loss_D": [], "loss_G": []}
    for step in range(args.steps):
        real = real_pool[torch.randint(0, real_pool.shape[0], (args.batch_size,))]
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        net_d.zero_grad()
        label = torch.full((args.batch_size,), 1.0)
        err_d_real = criterion(net_d(real), label)
        err_d_real.backward()
        fake = net_g(torch.randn(args.batch_size, args.nz, 1, 1))
        label.fill_(0.0)
        err_d_fake = criterion(net_d(fake.detach()), label)
        err_d_fake.backward()
        optimizer_d.step()
        # (2) update G: maximize log(D(G(z)))
        net_g.zero_grad()
        label.fill_(1.0)
        err_g = criterion(net_d(fake), label)
        err_g.backward()
        optimizer_g.step()
        history["loss_D"].append((err_d_real + err_d_fake).item())
        history["loss_G"].append(err_g.item())
        print(f"[{step}/{args.steps}] loss_D {history['loss_D'][-1]:.4f} loss_G {err_g.item():.4f}")
    with torch.no_grad():
        history["samples_shape"] = tuple(net_g(fixed_noise).shape)
    return history


if __name__ == "__main__":
    main()
