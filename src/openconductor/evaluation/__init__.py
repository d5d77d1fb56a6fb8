"""The one evaluator: policies × questions × repeats on one pool, graded, summarised.

``evaluate`` runs every (task, policy, question, repeat) through the same ``solve`` as ``conductor ask``
and grades it into an ``EvalRecord``; ``run_eval`` (``conductor eval``) does so into a resumable output
folder; ``summarize`` gives accuracy, tokens, calls, cost, steps and latency per (task, policy), broken
down per domain, with paired-bootstrap intervals against a named baseline (``pooled_bootstrap``: a mean over
pools). ``conductor eval``, the held-out evaluation of trained conductors (``train/evaluate.py``: ``conductor train
evaluate`` and the fit's), the simulated world's calibration (``calibration.py``) and its plan tables
(``simulated.py``) all run on it.
"""

from .records import RESULTS_FILE, EvalError, EvalRecord, load_records, question_domain, question_seed, record_from_run
from .report import pareto_front, plot, write_report
from .runner import evaluate, run_eval
from .setup import PLOT_FILE, SETUP_FILE, SUMMARY_FILE, TABLE_FILE, Setup, check_setup, eval_setup, start_fresh
from .summary import DomainStats, Interval, SummaryRow, compare, interval_text, markdown_table, paired_bootstrap, pooled_bootstrap, shape, summarize

__all__ = [
    "RESULTS_FILE", "SETUP_FILE", "SUMMARY_FILE", "TABLE_FILE", "PLOT_FILE",
    "EvalError", "EvalRecord", "load_records", "question_domain", "question_seed", "record_from_run",
    "evaluate", "run_eval", "Setup", "check_setup", "eval_setup", "start_fresh",
    "DomainStats", "Interval", "SummaryRow", "compare", "interval_text", "markdown_table", "paired_bootstrap", "pooled_bootstrap", "shape", "summarize",
    "pareto_front", "plot", "write_report",
]  # fmt: skip
