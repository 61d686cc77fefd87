#!/usr/bin/python3
"""Makes the small .npy data sets the example graphs run on (Debian's python3-numpy).

graphs/data/linreg_x.npy, linreg_y.npy: 64 rows of x ~ U(-1, 1)^3 and
    y = x @ [2, -3, 0.5] + 1 + N(0, 0.01^2), for graphs/linreg.json.
graphs/data/mlp_x.npy, mlp_y.npy: 16 rows of x ~ N(0, 1)^64 and labels in 0..9,
    for graphs/mlp.json.
graphs/data/two_tower_x.npy: 8 rows of x ~ N(0, 1)^64, for graphs/two_tower.json.
Run from the project root: /usr/bin/python3 graphs/make_data.py
"""
import os

import numpy as np

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261129)

x = rng.uniform(-1, 1, size=(64, 3)).astype("<f4")
w = np.array([[2.0], [-3.0], [0.5]])
y = (x.astype(np.float64) @ w + 1.0 + rng.normal(0, 0.01, size=(64, 1))).astype("<f4")
np.save(os.path.join(out, "linreg_x.npy"), x)
np.save(os.path.join(out, "linreg_y.npy"), y)

mx = rng.normal(0, 1, size=(16, 64)).astype("<f4")
my = rng.integers(0, 10, size=16).astype("<i8")
np.save(os.path.join(out, "mlp_x.npy"), mx)
np.save(os.path.join(out, "mlp_y.npy"), my)

tx = rng.normal(0, 1, size=(8, 64)).astype("<f4")
np.save(os.path.join(out, "two_tower_x.npy"), tx)
