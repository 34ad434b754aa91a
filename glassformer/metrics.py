"""Evaluation metrics: perplexity, accuracy, and sacreBLEU / chrF with their signatures.

BLEU and chrF are computed on free-running decoded text against one reference per sentence,
never on teacher-forced outputs. sacrebleu is imported lazily (a training dependency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def perplexity(mean_loss: float) -> float:
    """exp(mean cross-entropy in nats)."""
    return math.exp(min(mean_loss, 700.0))


def accuracy(predicted: list[int], labels: list[int]) -> float:
    if len(predicted) != len(labels) or not labels:
        raise ValueError("accuracy needs as many predictions as labels, at least one")
    return sum(int(p == y) for p, y in zip(predicted, labels, strict=True)) / len(labels)


@dataclass
class TranslationScores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    n: int

    def summary(self) -> str:
        return (
            f"BLEU {self.bleu:.1f} ({self.bleu_signature}) | "
            f"chrF {self.chrf:.1f} ({self.chrf_signature}) | {self.n} sentences"
        )


def translation_scores(hypotheses: list[str], references: list[str]) -> TranslationScores:
    """Corpus sacreBLEU and chrF of decoded sentences against single references."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references) or not references:
        raise ValueError("need one hypothesis per reference, at least one")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return TranslationScores(
        b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), len(references)
    )
