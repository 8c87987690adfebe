"""REINFORCE on a 10-armed Gaussian bandit; logs the mean reward and the policy's expected regret."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lr", type=float, default=0.1)
a = p.parse_args()
means = np.random.default_rng(9).normal(size=10)
rng = np.random.default_rng(a.seed)
theta = np.zeros(10)
for it in range(1, 31):
    rewards = []
    for _ in range(20):
        pi = np.exp(theta - theta.max())
        pi /= pi.sum()
        arm = rng.choice(10, p=pi)
        r = means[arm] + rng.normal()
        rewards.append(r)
        theta += a.lr * (r - 0.0) * (np.eye(10)[arm] - pi)
    pi = np.exp(theta - theta.max())
    pi /= pi.sum()
    regret = float(means.max() - pi @ means)
    print(json.dumps({"step": it, "reward": float(np.mean(rewards)), "eval_regret": regret}))
print(json.dumps({"eval_regret": regret}))
