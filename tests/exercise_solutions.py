"""The reference solutions of `glassformer exercises`, one function per exercise, written as a
learner would write them (plain NumPy, the stubs' names and signatures). They are kept here, in
the test suite, and never shipped: tests/test_exercises.py checks that each passes its exercise
(and this file passes through `glassformer exercises check N tests/exercise_solutions.py`).
"""

import math

import numpy as np


def softmax(x):  # 1
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def attention(Q, K, V):  # 2
    scores = Q @ K.T
    A = softmax(scores / math.sqrt(K.shape[-1]))
    return A @ V


def self_attention_v1(X, W_query, W_key, W_value):  # 3
    Q, K, V = X @ W_query, X @ W_key, X @ W_value
    return attention(Q, K, V)


def self_attention_v2(X, W_query, W_key, W_value):  # 4
    Q, K, V = X @ W_query.T, X @ W_key.T, X @ W_value.T
    return attention(Q, K, V)


def causal_attention_weights(Q, K):  # 5
    T = Q.shape[0]
    scores = Q @ K.T / math.sqrt(K.shape[-1])
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    return softmax(np.where(future, -np.inf, scores))


def dropout(A, keep, p):  # 6
    return A * keep / (1 - p)


def multi_head_attention(X, heads, W_O, scale=None):  # 7
    outs = []
    for WQ, WK, WV in heads:
        Q, K, V = X @ WQ, X @ WK, X @ WV
        c = math.sqrt(K.shape[-1]) if scale is None else scale
        outs.append(softmax(Q @ K.T / c) @ V)
    return np.concatenate(outs, axis=-1) @ W_O


def sinusoidal_positions(T, C, split=False):  # 8
    pos = np.arange(T)[:, None]
    i = np.arange(0, C, 2)
    angle = pos / 10000 ** (i / C)
    sin, cos = np.sin(angle), np.cos(angle)[:, : C // 2]
    if split:
        return np.concatenate([sin, cos], axis=1)
    PE = np.zeros((T, C))
    PE[:, 0::2], PE[:, 1::2] = sin, cos
    return PE


def layer_norm(x, gamma, beta, eps=1e-5):  # 9
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def article_layer_norm(x, eps=1e-6):  # 10
    return (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps)


def ffn(x, W1, b1, W2, b2):  # 11
    return np.maximum(x @ W1 + b1, 0) @ W2 + b2


def encoder_block(X, heads, W_O, W1, b1, W2, b2, eps=1e-5):  # 12
    C = X.shape[-1]
    Y = layer_norm(X + multi_head_attention(X, heads, W_O), np.ones(C), np.zeros(C), eps)
    return layer_norm(Y + ffn(Y, W1, b1, W2, b2), np.ones(C), np.zeros(C), eps)


def cross_attention(Y, M, heads, W_O):  # 13
    outs = []
    for WQ, WK, WV in heads:
        outs.append(attention(Y @ WQ, M @ WK, M @ WV))
    return np.concatenate(outs, axis=-1) @ W_O


def greedy_decode(step, bos_id, eos_id, max_len):  # 14
    ids = [bos_id]
    while len(ids) < max_len:
        token = int(np.argmax(step(ids)))
        ids.append(token)
        if token == eos_id:
            break
    return ids


def beam_step(hypotheses, logprobs, width):  # 15
    candidates = []
    for (ids, logprob), row in zip(hypotheses, logprobs, strict=True):
        for token, lp in enumerate(row):
            candidates.append((logprob + lp, ids + [token]))
    candidates.sort(key=lambda c: -c[0])  # stable: ties keep hypothesis, then token, order
    return [(ids, score) for score, ids in candidates[:width]]


def attend_with_cache(x, W_query, W_key, W_value, cache):  # 16
    K, V = cache
    q = x @ W_query
    K = np.vstack([K, x @ W_key])
    V = np.vstack([V, x @ W_value])
    z = softmax(q @ K.T / math.sqrt(K.shape[-1])) @ V
    return z, (K, V)
