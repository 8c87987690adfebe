"""Epochs of SGD over a shuffled order (pure Python); JSON lines per epoch."""
import json
import random
import sys

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr = int(a["seed"]), float(a["lr"])
data_rng = random.Random(seed)
pts = [(x, 3 * x - 1 + data_rng.gauss(0, 0.5)) for x in (data_rng.uniform(-1, 1) for _ in range(80))]
w = b = 0.0
order = list(range(60))
shuffle = random.Random(seed).shuffle
for epoch in range(1, 6):
    shuffle(order)
    for i in order:
        x, y = pts[i]
        e = w * x + b - y
        w, b = w - lr * e * x, b - lr * e
    print(json.dumps({"step": epoch, "train_mse": sum((w * x + b - y) ** 2 for x, y in pts[:60]) / 60}))
print(json.dumps({"val_mse": sum((w * x + b - y) ** 2 for x, y in pts[60:]) / 20}))
