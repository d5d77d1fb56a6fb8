"""The trained conductor, used by the runtime and the trainers alike.

* ``prompt.py``: the messages it is sent (the pool as it sees it, the round so far) and the language it plans in;
* ``ranking.py``: the pool's measured ranking per area and the rank words that name its workers;
* ``checkpoint.py``: where a checkpoint is, how it loads, and the pool settings that prompt it as it was trained;
* ``manifest.py``: the ``openconductor.json`` a checkpoint carries (how it was trained and prompted);
* ``familiar.py``: the familiarity gate (a question unlike its training questions runs a fixed workflow instead);
* ``gguf_weights.py``, ``gguf_export.py``: its llama.cpp copy; ``portable.py``: an export made loadable elsewhere.

The policy that plans with it is ``policies/lm.py``; training it is ``openconductor.train``.
"""
