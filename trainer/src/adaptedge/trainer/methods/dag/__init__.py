"""Adaptive sensor acquisition: the policy graph (DAG) over sensor subsets, trained by Graph-Reduce.

Wang, Trapeznikov & Saligrama (NIPS 2015), extended with escalation to the cloud HPC as one
more action. ``problem`` holds the numpy view of a dataset, ``bank`` the per-subset
classifiers, ``masked`` one classifier trained with sensors hidden and the per-node choice
between the two, ``subsets`` the greedy sensor-subset selection, ``graph`` the lattice,
``reduce`` Graph-Reduce, ``nodes`` the trained graph and its walk, ``export`` the ONNX export,
``baselines`` static / cascade / all-sensors / one-node graphs and ``method`` the registry
entry ``adaptedge train --method dag``.
"""
