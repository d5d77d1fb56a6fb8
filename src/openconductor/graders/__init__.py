"""Graders: is an executor's final answer correct?

``grade(kind, response, reference, **options) -> Grade`` with kind one of ``math``, ``choice``,
``numeric``, ``exact``, ``code`` (``agrade`` is the async form). A task adds a kind with
``@register_grader("name")`` in one file. See docs/graders-and-sandbox.md.
"""

from .base import MAX_RESPONSE_CHARS, SCORING_VERSION, Grade, GraderError, agrade, grade, grader_kinds, register_grader

# Importing the modules registers their graders.
from . import choice as _choice  # noqa: F401,E402
from . import code_grade as _code  # noqa: F401,E402
from . import exact as _exact  # noqa: F401,E402
from . import math_grade as _math  # noqa: F401,E402
from . import numeric as _numeric  # noqa: F401,E402

__all__ = ["Grade", "GraderError", "MAX_RESPONSE_CHARS", "SCORING_VERSION", "grade", "agrade", "register_grader", "grader_kinds"]
