"""The plan search on a real pool: workflows run on the pool, graded by the training reward, the best kept.

* ``settings.py``: the ``[search]`` table of a training config;
* ``candidates.py``: the fit's shared candidate set, built from what the pool has;
* ``screening.py``: successive halving and ranking rounds, shared by both searches below;
* ``warmup_targets.py``: ``conductor train``'s search for the warm-up's targets (random workflows, per question
  or per domain);
* ``fit_targets.py``: ``conductor fit``'s search (profile, screen the candidates per group, each question's target).

The simulated world's plan search (SIMULATED, on its fast path, no pool calls) is ``sim/plan_search.py``: it sits
in the sim layer because the evaluation's calibration, below training, runs it too.
"""
