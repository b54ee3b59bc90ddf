"""PolyDom and the Greedy family (Indexing Cost Sensitive Prediction): feature-set lattice
pruning, the polydominance index over item sizes, Greedy / GreedyAcc / GreedyCost."""
