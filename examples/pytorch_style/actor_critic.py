"""Actor-critic with a Categorical policy, in the shape of pytorch/examples' reinforcement_learning.

Instead of gym, a tiny corridor: the agent starts at cell 0 of ``length`` cells and is rewarded for
reaching the last one (a small cost per step), so shorter episodes mean a better policy.
Written for PyTorch; runs unmodified with ``import munet as torch`` (the only line that differs).
"""

import argparse
from collections import namedtuple

import numpy as np

import munet as torch

nn = torch.nn
F = torch.nn.functional
optim = torch.optim
Categorical = torch.distributions.Categorical

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Corridor:
    """Cells 0..length-1; action 0 steps left, 1 steps right; the episode ends at the last cell."""

    def __init__(self, length=6, max_steps=40):
        self.length, self.max_steps = length, max_steps

    def observation(self):
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self):
        self.position, self.steps = 0, 0
        return self.observation()

    def step(self, action):
        self.position = min(max(self.position + (1 if action == 1 else -1), 0), self.length - 1)
        self.steps += 1
        done = self.position == self.length - 1 or self.steps >= self.max_steps
        reward = 1.0 if self.position == self.length - 1 else -0.05
        return self.observation(), reward, done


class Policy(nn.Module):
    def __init__(self, n_obs, n_actions, hidden=32):
        super().__init__()
        self.affine1 = nn.Linear(n_obs, hidden)
        self.action_head = nn.Linear(hidden, n_actions)
        self.value_head = nn.Linear(hidden, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


def select_action(model, state):
    probs, state_value = model(torch.from_numpy(state).float())
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode(model, optimizer, gamma, eps=1e-6):
    ret = 0.0
    returns = []
    for r in model.rewards[::-1]:
        ret = r + gamma * ret
        returns.insert(0, ret)
    returns = torch.tensor(returns)
    if len(returns) > 1:
        returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_losses, value_losses = [], []
    for (log_prob, value), ret in zip(model.saved_actions, returns):
        advantage = ret - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([ret.item()])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]
    return loss.item()


def main(argv=None):
    parser = argparse.ArgumentParser(description="actor-critic on a tiny corridor")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--lr", type=float, default=3e-2)
    parser.add_argument("--seed", type=int, default=543)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    env = Corridor()
    model = Policy(env.length, 2)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    lengths = []
    for episode in range(args.episodes):
        state, done = env.reset(), False
        while not done:
            state, reward, done = env.step(select_action(model, state))
            model.rewards.append(reward)
        lengths.append(env.steps)
        finish_episode(model, optimizer, args.gamma)
        if episode % 10 == 0:
            print(f"episode {episode}\tlength {env.steps}")
    return {"lengths": lengths}


if __name__ == "__main__":
    main()
