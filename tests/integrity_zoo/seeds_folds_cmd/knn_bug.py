"""k-nearest-neighbour regression of a noisy sine, pure Python; argparse, one JSON line out."""
import argparse
import json
import math
import random

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--folds", type=int, default=3)
p.add_argument("--k", type=int, default=3)
a = p.parse_args()
rng = random.Random(a.seed % a.folds)
pts = [(x, math.sin(3 * x) + rng.gauss(0, 0.3)) for x in (rng.uniform(-2, 2) for _ in range(120))]
train, val = pts[:90], pts[90:]


def predict(x):
    near = sorted(train, key=lambda t: abs(t[0] - x))[:a.k]
    return sum(t[1] for t in near) / len(near)


err = sum((predict(x) - y) ** 2 for x, y in val) / len(val)
print(json.dumps({"val_err": err}))
