"""Task labels, cutoffs, the rule baselines and the metrics."""
