"""Why CSTC-boosted costs what it costs on letter-binary (seed 0, default settings).

Prints, per boosting run of the default ``tree_gammas``: the sensors its trees read (in all and
per tree) and the validation accuracy of the run's own sum of trees; then, for the point of
``benchmarks.cstc``'s ``vs_greedy_miser`` (lambda 0.001, escalation threshold 0.7, the same
model as in the full sweep: each lambda's model is trained on the same trees independently),
its validation cost split into sensors read and tree evaluation, and the trees of each node.

Run: ``python -m benchmarks.cstc_boosted_anatomy``.
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    from adaptedge.protocol.costs import compute_cost
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.cstc.boosted import TreeSettings, fit_boosted
    from adaptedge.trainer.methods.cstc.estimator import _targets
    from adaptedge.trainer.methods.cstc.method import TREES
    from adaptedge.trainer.methods.dag.problem import problem_from
    from adaptedge.trainer.methods.registry import MethodOptions, get_method
    from adaptedge.trainer.policy.walk import walk

    d = load_dataset("letter-binary", seed=0)
    hpc = fit_hpc(d, seed=0)
    cols = [s.features for s in d.sensors]
    Y = _targets(d.y_train, 2)
    for gamma in TREES.gammas:
        f = fit_boosted(d.X_train, Y, cols, TreeSettings(TREES.trees, TREES.depth,
                                                         TREES.learning_rate, gammas=(gamma,)))
        score = f.transform(d.X_val).sum(axis=1) + Y.mean()
        per_tree = [len(s) for s in f.sensors]
        print(f"gamma {gamma:g}: {f.n_trees} trees reading {len(set().union(*f.sensors))} "
              f"sensors, {np.mean(per_tree):.2f} per tree ({min(per_tree)}-{max(per_tree)}); "
              f"validation accuracy of their sum {((score > 0.5) == d.y_val).mean():.4f}")
    graphs = get_method("cstc")(d, hpc, MethodOptions(seed=0, progress=False, extra={
        "features": "boosted", "lambdas": "0.001"}))
    table = problem_from(d, hpc).cost_table()
    for g in graphs:
        if g.params["threshold"] != 0.7:
            continue
        r = walk(g, d.X_val, hpc.proba_val, table)
        spent = np.zeros(len(d.y_val))
        for nid, rows in r.visits.items():
            spent[rows] += compute_cost(g.nodes[nid].compute, d.cost_weights).scalar
        trees = {nid: len(getattr(node.model, "trees", ())) for nid, node in g.nodes.items()}
        print(f"lambda 0.001, threshold 0.7: {r.metrics(d.y_val)}; mean tree evaluation "
              f"{spent.mean():.3f}, mean sensors read {r.read.sum(axis=1).mean():.3f}; "
              f"trees per node {trees}")


if __name__ == "__main__":
    main()
