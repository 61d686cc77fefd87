#!/usr/bin/python3
"""Makes the handwritten digits data set `make demo` and `pardo train` use
(Debian's python3-sklearn and python3-numpy).

Source: scikit-learn's copy of the UCI ML hand-written digits data set,
sklearn.datasets.load_digits(): 1,797 images of 8x8 pixels with values 0..16,
labels 0..9. E. Alpaydin and C. Kaynak, "Optical Recognition of Handwritten
Digits", UCI Machine Learning Repository, 1998.

graphs/data/digits_train_x.npy  float32 [1438, 64], pixels / 16 (in [0, 1])
graphs/data/digits_train_y.npy  int64   [1438], labels 0..9
graphs/data/digits_test_x.npy   float32 [359, 64]
graphs/data/digits_test_y.npy   int64   [359]
The split is a fixed permutation (numpy default_rng(1998)): the first 359 (1797 // 5)
of the permuted rows are the test set, the rest the training set.
Run from the project root: /usr/bin/python3 graphs/make_digits.py
"""
import os

import numpy as np
from sklearn.datasets import load_digits

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(out, exist_ok=True)

digits = load_digits()
x = (digits.data / 16.0).astype("<f4")
y = digits.target.astype("<i8")
assert x.shape == (1797, 64) and y.shape == (1797,)

perm = np.random.default_rng(1998).permutation(len(x))
n_test = len(x) // 5
test, train = perm[:n_test], perm[n_test:]
np.save(os.path.join(out, "digits_train_x.npy"), x[train])
np.save(os.path.join(out, "digits_train_y.npy"), y[train])
np.save(os.path.join(out, "digits_test_x.npy"), x[test])
np.save(os.path.join(out, "digits_test_y.npy"), y[test])
print("train", x[train].shape, np.bincount(y[train]), "test", x[test].shape, np.bincount(y[test]))
