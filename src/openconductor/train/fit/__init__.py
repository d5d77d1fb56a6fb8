"""``conductor fit POOL``: from a pool file to a conductor for it (``run.run_fit``), one module per stage.

    context.py    the settings, the recipe, the pool work shared by the stages (FitSettings, FitContext)
    questions.py  the training and held-out questions           copy.py      the supervised copy and its fidelity bar
    ship.py       conductor or lookup: what the fit ships        report.py    the report and the model card
    state.py      the resumable state (fit.json)                 progress.py  bars or JSON lines
    timing.py     seconds per call and per stage (dry run)       cli.py       the command
    spend_caps.py the fit's metered replay store and its caps on calls and cost
    run.py        the stages in order

Stages whose code ``conductor train`` shares live beside it in ``train/``: ``search/fit_targets.py`` (profile, plan
search, targets), ``evaluate.py`` (the held-out evaluation) and ``dry_run.py`` (calls, tokens, cost, time).
"""
