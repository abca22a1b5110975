"""Retrieval evaluation on BEIR-layout sets: reading them, and the measures BEIR reports."""

from shared.evaluation.beir import BeirSet, load_beir
from shared.evaluation.metrics import evaluate, ndcg_at, recall_at

__all__ = ["BeirSet", "evaluate", "load_beir", "ndcg_at", "recall_at"]
