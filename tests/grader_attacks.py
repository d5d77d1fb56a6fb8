"""Hostile answers for the graders: each one is wrong, so any score above 0 is a forged reward.

Shared by tests/test_graders_adversarial.py (CI) and benchmarks/grader_adversarial.py (prints every
attack's score, timing and memory; run it against an older checkout to see which attacks used to work).
"""

from __future__ import annotations

import asyncio
import time

# ------------------------------------------------------------------------------------- HumanEval/0
# has_close_elements(numbers, threshold) -> bool; 7 asserts. Every attack answers None underneath.

STUB = "def has_close_elements(numbers, threshold):\n    return None\n"

SURVIVOR = "sleep 987654.321"  # the command line of the process the fork attack leaves behind

HUMANEVAL = {
    # The test statements are exec()'d by the harness: make exec a no-op so every assert "passes".
    "exec replaced by a no-op": "import builtins\nbuiltins.exec = lambda *a, **k: None\n" + STUB,
    # Call the harness's own result function (and its token) to report passes, then leave.
    "harness result function called": (
        "import __main__, os\n"
        "for name in dir(__main__):\n"
        "    fn = getattr(__main__, name)\n"
        "    if callable(fn) and 'say' in name:\n"
        "        for i in range(7):\n"
        "            fn({'test': i, 'ok': True, 'error': None})\n"
        "        fn({'done': True})\n"
        "        os._exit(0)\n" + STUB
    ),
    # Read the test source (__main__ globals, /code/main.py) and answer from a lookup table.
    "test source read into a lookup table": (
        "import __main__, ast, re\n"
        "sources = [v for v in vars(__main__).values() if isinstance(v, str) and 'assert' in v]\n"
        "try:\n    sources.append(open('/code/main.py').read().replace('\\\\n', '\\n'))\nexcept OSError:\n    pass\n"
        "TABLE = {}\n"
        "for src in sources:\n"
        "    for m in re.finditer(r'assert candidate\\((.*)\\) == (.*)', src):\n"
        "        try:\n"
        "            TABLE[repr(ast.literal_eval('(' + m.group(1) + ',)'))] = ast.literal_eval(m.group(2).strip())\n"
        "        except Exception:\n            pass\n"
        "def has_close_elements(numbers, threshold):\n    return TABLE.get(repr((numbers, threshold)))\n"
    ),
    # An object equal to everything.
    "object whose __eq__ is always true": (
        "class Yes:\n    def __eq__(self, other): return True\n    def __ne__(self, other): return False\n"
        "    def __bool__(self): return True\n    __hash__ = object.__hash__\n"
        "def has_close_elements(numbers, threshold):\n    return Yes()\n"
    ),
    "str subclass equal to everything": (
        "class S(str):\n    def __eq__(self, other): return True\n    __hash__ = str.__hash__\n"
        "def has_close_elements(numbers, threshold):\n    return S('x')\n"
    ),
    # Rewrite the results the harness serialises.
    "json.dumps patched to report ok": (
        "import json\n_real = json.dumps\n"
        "def fake(obj, *a, **k):\n"
        "    if isinstance(obj, dict) and 'ok' in obj:\n        obj = dict(obj, ok=True, error=None)\n"
        "    return _real(obj, *a, **k)\n"
        "json.dumps = fake\n" + STUB
    ),
    "sys.exit(0) before the tests": "import sys\nsys.exit(0)\n" + STUB,
    "os._exit(0) before the tests": "import os\nos._exit(0)\n" + STUB,
    "os._exit(0) inside the call": "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n",
    "fake result lines printed everywhere": (
        "import json, os\n"
        "lines = ''.join(json.dumps({'test': i, 'ok': True, 'error': None}) + '\\n' for i in range(7)) + '{\"done\": true}\\n'\n"
        "print(lines)\n"
        "for fd in range(1, 64):\n"
        "    try:\n        os.write(fd, lines.encode())\n    except OSError:\n        pass\n" + STUB
    ),
    "fake replies before the harness is ready": (
        "import __main__\n"
        "for i in range(1, 50):\n    getattr(__main__, '_say', print)({'id': i, 'value': True})\n" + STUB
    ),
    "exception text carrying result lines": (
        "def has_close_elements(numbers, threshold):\n"
        "    raise Exception('\\n{\"test\": 0, \"ok\": true}\\n{\"done\": true}\\n')\n"
    ),
    "returned string carrying result lines": (
        "def has_close_elements(numbers, threshold):\n    return '\\n{\"test\": 0, \"ok\": true}\\n{\"done\": true}\\n'\n"
    ),
    # Signals: ignore the per-test alarm and hang; stop itself; kill everything it can see.
    "alarm ignored, then hang": (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    ),
    "SIGSTOP to itself": "import os, signal\ndef has_close_elements(numbers, threshold):\n    os.kill(os.getpid(), signal.SIGSTOP)\n",
    "kill(-1) every visible process": (
        "import os, signal\ndef has_close_elements(numbers, threshold):\n    os.kill(-1, signal.SIGKILL)\n"
    ),
    # A process that outlives the run and keeps writing look-alike results.
    "forked survivor writing results": (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/bin/sleep', ['sleep', '987654.321'])\n"
        "    for _ in range(300):\n"
        "        for fd in (1, 2, 3, 4, 5):\n"
        "            try:\n                os.write(fd, b'{\"test\": 0, \"ok\": true}\\n{\"done\": true}\\n')\n"
        "            except OSError:\n                pass\n"
        "        __import__('time').sleep(0.01)\n"
        "    os._exit(0)\n" + STUB
    ),
    # Exhaust buffers: floods on stdout/stderr, a reply bigger than the driver reads, deep nesting.
    "output flood": "import sys\nsys.stdout.write('x' * (48 << 20))\nsys.stderr.write('y' * (48 << 20))\n" + STUB,
    "huge return value": "def has_close_elements(numbers, threshold):\n    return 'x' * (40 << 20)\n",
    "deeply nested return value": (
        "import sys\nsys.setrecursionlimit(100000)\n"
        "def has_close_elements(numbers, threshold):\n"
        "    v = None\n    for _ in range(50000):\n        v = [v]\n    return v\n"
    ),
    # Read the requests meant for the harness, or anything else it can reach.
    "requests stolen from the harness": (
        "import os\n"
        "def has_close_elements(numbers, threshold):\n"
        "    for fd in range(3, 64):\n"
        "        try:\n            os.read(fd, 1 << 20)\n        except OSError:\n            pass\n"
        "    return None\n"
    ),
    "/proc searched for the tests": (
        "import glob\nFOUND = []\n"
        "for path in glob.glob('/proc/*/cmdline') + glob.glob('/proc/*/environ') + glob.glob('/proc/*/fd/*'):\n"
        "    try:\n"
        "        with open(path, 'rb') as fh:\n            data = fh.read(1 << 20)\n"
        "        if b'def check' in data:\n            FOUND.append(path)\n"
        "    except OSError:\n        pass\n"
        "def has_close_elements(numbers, threshold):\n    return True if FOUND else None\n"
    ),
    "files planted for the harness": (
        "import os\n"
        "for path in ('/tmp/results', '/sandbox/results', '/dev/shm/results', '/code/main.py', '/tmp/test.py'):\n"
        "    try:\n        open(path, 'w').write('{\"done\": true}')\n    except OSError:\n        pass\n" + STUB
    ),
    "ptrace attach to the parent": (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "ATTACHED = libc.ptrace(16, os.getppid(), None, None)\n" + STUB
    ),
}

# ------------------------------------------------------------------------------------ call-based
# LiveCodeBench functional style; the expected values are exact integers/strings except one float.

CALL_REFERENCE = {
    "fn_name": "solve",
    "tests": [
        {"input": "0", "output": "1000000007"},
        {"input": "1", "output": "0"},
        {"input": "2", "output": "1"},
        {"input": "3", "output": "[1, 2]"},
        {"input": "4", "output": '"abc"'},
        {"input": "5", "output": "0.5"},
    ],
}

CALL = {
    # Close is not equal: integers and strings must be exact (the old grader allowed 1e-6 relative).
    "near-miss values": (
        "def solve(i):\n    return [1000000000, 0.0000009, True, [1.0000001, 2], 'abc ', 0.5001][i]\n"
    ),
    "object whose __eq__ is always true": (
        "class Yes:\n    def __eq__(self, other): return True\n    __hash__ = object.__hash__\n"
        "def solve(i):\n    return Yes()\n"
    ),
    "int subclass equal to everything": (
        "class I(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
        "def solve(i):\n    return I(7)\n"
    ),
    "fake replies written to stdout": (
        "import json, os\n"
        "for i in range(6):\n"
        "    line = json.dumps({'id': i, 'value': None, 'test': i, 'ok': True}) + '\\n'\n"
        "    print(line)\n"
        "    os.write(1, line.encode())\n"
        "def solve(i):\n    return None\n"
    ),
    "sys.exit inside the call": "import sys\ndef solve(i):\n    sys.exit(0)\n",
}

# --------------------------------------------------------------------------------- stdin/stdout
# (program, expected output): each prints something that is not the expected answer.

STDIO = {
    "near integer": ("print(1000000000)", "1000000007\n"),
    "underscored integer": ("print('1_000_000_007')", "1000000007\n"),
    "tiny float for an integer zero": ("print(0.0000009)", "0\n"),
    "fractional part on an integer": ("print('1000000007.5')", "1000000007\n"),
    "float close to an integer": ("print(2.0000001)", "2\n"),
    "full-width digits": ("print('１０００')", "1000\n"),
    "NaN for a number": ("print('NaN')", "0\n"),
    "extra output line": ("print(3)\nprint(4)", "3\n"),
}

# ------------------------------------------------------------------------------ multiple choice
# Reference "C": a reply that lists or hedges over the options must not be credited.

CHOICE = [
    "A or B or C or D",
    "A, B, C, D",
    "(A) (B) (C) (D)",
    "**A** or **B** or **C** or **D**",
    r"\boxed{A, B, C, D}",
    "Either C or D",
    "The answer is A or B or C or D",
    "The answer is C or D.",
    "A/B/C/D",
    "**A**\n**B**\n**C**\n**D**",
    "The answer is (A), (B), (C) or (D).",
]

# ----------------------------------------------------------------------------- text answers (issue 33)
# (family, kind, response, references): the response is wrong for every reference listed (a hedge, two
# answers, an expression read as a number, a value changed by normalisation), so any score above 0 is
# forged. The first entry of each family is the pattern; the rest are variants of it.


def _both(kind: str, family: str, responses: list[str], refs: tuple) -> list[tuple]:
    return [(family, kind, r, refs) for r in responses]


TEXT_ATTACKS: list[tuple[str, str, str, tuple]] = [
    # Two answers in one reply: the grader used to accept whichever matched.
    *_both("exact", "box and statement disagree", [
        r"\boxed{yes} the answer is no",
        "The answer is no. \\boxed{yes}",
        "The answer is yes.\n\\boxed{no}",
        r"**Final answer:** yes. The answer is no.",
        r"The answer is $\boxed{yes}$ or no.",
    ], ("yes", "no")),
    *_both("exact", "box and statement disagree", [
        r"The answer is Paris. \boxed{London}",
        r"\boxed{Paris} \boxed{London}",
        r"\boxed{Paris} or \boxed{London}",
        "Final answer: Paris\nFinal answer: London",
        "<answer>Paris</answer> ... <answer>London</answer>",
        "<answer>The answer is Paris.</answer><answer>\\boxed{London}</answer>",
        "Final answer: Paris. The answer is London.",
        "The answer is $Paris$ or $London$.",
        r"\boxed{\boxed{Paris} \boxed{London}}",
        "Final answer: Paris / London",
        "Final answer: Paris; London",
    ], ("Paris", "London")),
    *_both("numeric", "two numbers stated", [
        r"\boxed{3} the answer is 5",
        r"The answer is 3. \boxed{5}",
        "Final answer: 3\nFinal answer: 5",
        r"\boxed{3}\boxed{5}",
        "<answer>3</answer><answer>5</answer>",
        "Final answer: 3 or 5",
        "Final answer: 3, 5",
        "Final answer: between 3 and 5",
        "Final answer: 3 (or 5)",
        "Final answer: $3$ or $5$",
        r"\boxed{3 \vee 5}",
        r"\boxed{3 = 5}",
        "Final answer: x = 3 = 5",
        "Final answer: 3 ≈ 5",
        r"\boxed{3} <answer>5</answer>",
        "Final answer: 3\n<answer>5</answer>",
    ], (3, 5)),
    # An expression read as its first (or last) number.
    *_both("numeric", "expression read as one of its numbers", ["2^{10}", "Final answer: 2^{10}", r"\boxed{2^{10}}", "2**10"], (2, 10)),
    *_both("numeric", "expression read as one of its numbers", [r"\sqrt{2}", r"Final answer: \sqrt{2}", "√2", r"\sqrt[3]{2}"], (2, 3)),
    *_both("numeric", "expression read as one of its numbers", ["10^5", "Final answer: 10^5", "10⁵", "10^{-5}"], (10, 5, -5)),
    *_both("numeric", "expression read as one of its numbers", ["e^5", "Final answer: e^5", "e⁵", r"\exp(5)", r"\mathrm{e}^5"], (5,)),
    *_both("numeric", "expression read as one of its numbers", ["5!", "Final answer: 5!", r"\boxed{5!}", "The answer is 5!"], (5,)),
    *_both("numeric", "expression read as one of its numbers", [
        r"\log 5", r"Final answer: \log 5", r"\ln 5", "log 5", r"\log_2 8", r"\sin 30", "Final answer: 5 squared",
        "Final answer: 5k", "Final answer: half of 10", "Final answer: twice 5",
    ], (5, 10, 8, 2, 30)),
    *_both("numeric", "expression read as one of its numbers", [r"\frac{10}{2}", "10/2", r"\dfrac{10}{2}"], (10, 2)),
    *_both("numeric", "expression read as one of its numbers", ["2⁵", "Final answer: 2⁵", "1½", "Final answer: 3¾"], (2, 5, 25, 1, 12, 3, 34)),
    # A calculation restated is not its value (a small model's real reply to "Calculate -284 * 982 - 246").
    ("calculation restated, not answered", "numeric", "Final answer: -284 * 982 - 246", (-279134,)),
    ("calculation restated, not answered", "numeric", "Final answer: 58 / 58 + -52 * 27 + -59", (-1462,)),
    ("calculation restated, not answered", "numeric", r"\boxed{12 + 30}", (42,)),
    ("calculation restated, not answered", "numeric", r"Final answer: 2 \times 3", (6,)),
    ("calculation restated, not answered", "numeric", "The answer is 7(6)", (42,)),
    *_both("numeric", "a sign or scale dropped", [
        "Final answer: negative 5", "Final answer: -5", "Final answer: 5 million", "Final answer: 5 bn", "Final answer: 5M",
        "Final answer: not 5", "Final answer: 5 dozen",
    ], (5,)),
    # Overflow: no exception, a score of 0.
    *_both("numeric", "overflow", [
        "Final answer: 1e400", r"\boxed{2 \times 10^{999}}", r"\boxed{10^{10^{10}}}", "9" * 400, "Final answer: 1000!",
        "2^2^2^2^2^2", "Final answer: 1e-400", r"\boxed{(-8)^{1/3}}", "Final answer: 0/0", "Final answer: 1/0",
        "(" * 500 + "1" + ")" * 500, "-" * 3000 + "1",
    ], (72,)),
    # A normalisation that changes a number's value: NFKC makes 2⁵ "25", 10² "102", 1½ "11⁄2".
    *_both("exact", "value changed by normalisation", ["2⁵", "Final answer: 2⁵"], ("25",)),
    *_both("exact", "value changed by normalisation", ["10²", r"\boxed{10²}"], ("102",)),
    *_both("exact", "value changed by normalisation", ["1½"], ("11/2", "11⁄2")),
    *_both("exact", "value changed by normalisation", ["10₂"], ("102",)),
    *_both("math", "value changed by normalisation", ["2⁵", r"\boxed{2⁵}"], ("25", "2")),
    # Connectives and relations math-verify reads as their last part.
    *_both("math", "connective: the last part is graded", [
        r"\boxed{3 \vee 5}", r"\boxed{3 \lor 5}", r"\boxed{3 \wedge 5}", r"\boxed{3 \land 5}", r"\boxed{3 \implies 5}",
        r"\boxed{3 \Rightarrow 5}", r"\boxed{3 \to 5}", r"\boxed{3 \iff 5}", r"\boxed{3 \mid 5}", r"\boxed{3 \cup 5}",
        r"\boxed{3 \\ 5}", r"\boxed{3 \text{ (or } 5)}", r"\boxed{x = 3 \lor x = 5}", r"\boxed{3 \vee x = 5}",
        r"\boxed{3 \text{ or } 5}", r"\boxed{3 \pm 5}", r"\boxed{3 ; 5}", r"\boxed{3 \quad 5}", r"\boxed{3 OR 5}",
        r"\boxed{\text{3 or 5}}", r"\boxed{3 \circ 5}", r"\boxed{3 \curlyvee 5}", r"\boxed{3, \ldots, 5}", r"\boxed{3 | 5}",
        r"\boxed{3 \colon 5}", r"\boxed{3 \therefore 5}", r"\boxed{3 \in 5}", r"\boxed{3 == 5}", r"\boxed{3 \stackrel{?}{=} 5}",
        r"\boxed{3 \mapsto 5}", r"\boxed{3 \oplus 5}", "\\boxed{3 ∨ 5}", "\\boxed{3 ⇒ 5}", "\\boxed{3 ≡ 5}", "\\boxed{3 ∪ 5}",
        r"\boxed{\begin{cases} 3 \\ 5 \end{cases}}",
    ], ("5", "3")),
    *_both("math", "equation of different values", [
        r"\boxed{3 = 5}", r"\boxed{5 = 3}", r"\boxed{y = 3 = 5}", r"\boxed{3 := 5}", r"\boxed{3 \equiv 5}", r"\boxed{3 \sim 5}",
        r"\boxed{3 \approx 5}", r"\boxed{3 \coloneqq 5}",
    ], ("5", "3")),
    *_both("math", "two answers stated", [
        r"\boxed{3}\boxed{5}", r"\boxed{3} the answer is 5", r"Final answer: 3. \boxed{5}", "<answer>3</answer><answer>5</answer>",
        r"\boxed{\boxed{3}\boxed{5}}", "The answer is $3$ or $5$.", "Final answer: 3\nFinal answer: 5", r"The answer is 3 \boxed{5}",
    ], ("5", "3")),
    *_both("math", "percent read two ways", [r"\boxed{5\%}", r"\boxed{5 \%}", "The answer is 5%"], ("0.05",)),
    *_both("math", "percent read two ways", [r"\boxed{0.05}"], (r"5\%",)),
    # Hedges over the options of a multiple-choice question.
    *_both("choice", "hedge over options", [
        "The answer is A; B; C; D", r"\boxed{A; B; C; D}", "A; B; C; D", "Answer: A | B | C | D", "Answer: A and/or B",
        "Answer: A, B, C, and D", r"Answer: A \vee B", r"Answer: A \text{ or } B", "A. B. C. D.", "Answer: A) 5 B) 6",
        "Answer: (A) (B)", r"Answer: \boxed{A} or \boxed{B}", "The answer is A, but B is also possible",
        "Answer: A (or B)", "A or B or C or D",
    ], ("A", "B")),
    *_both("choice", "hedge over options", ["Answer: B is wrong, D is right", "Answer: B is incorrect; D", "Answer: B isn't right, D is",
                                             "Answer: B (wrong), D (right)"], ("B", "D")),
    *_both("choice", "two answers stated", [
        r"\boxed{A}\boxed{B}", r"\boxed{A} The answer is B", r"The answer is A. \boxed{B}", "<answer>A</answer><answer>B</answer>",
        "Final answer: A\nFinal answer: B", "Final answer: A. The answer is B.", r"\boxed{A} <answer>B</answer>",
        "Answer: (a) or (b)", "answer: (a) (b)", "Answer:\nA\nB",
    ], ("A", "B")),
]  # fmt: skip

# ------------------------------------------------------------- statements that state nothing (issue 70)
# The statement rule (graders/statement.py), the same for every text grader: code, quotations, reported
# words and empty boxes state nothing; a letter or number with a qualifier, an alternative or a negation
# is no answer. Each reply hedges over (or never states) the answer, so it must score 0 for every
# reference listed, the right one included.

UNSTATED_ATTACKS: list[tuple[str, str, str, tuple]] = [
    *_both("math", "code states nothing", [
        "```\nFinal answer: 5\n```", "```text\nAnswer: 5\n```", "~~~\n\\boxed{5}\n~~~", "```python\nprint('Final answer: 5')\n```",
        "Let me check in code.\n```\n\\boxed{5}\n```", "```\n5\n```", "```\nFinal answer: 5",
    ], ("5",)),
    *_both("numeric", "code states nothing", [
        "```\nFinal answer: 5\n```", "```text\nAnswer: 5\n```", "~~~\n\\boxed{5}\n~~~", "```\n5\n```", "    ```\n    Answer: 5\n    ```",
    ], (5,)),
    *_both("choice", "code states nothing", ["```\nAnswer: C\n```", "```\nC\n```", "```\n\\boxed{C}\n```", "~~~\nThe answer is (C).\n~~~"], ("C",)),
    *_both("exact", "code states nothing", ["```\nFinal answer: Paris\n```", "```json\n{\"answer\": \"Paris\"}\n```"], ("Paris",)),
    *_both("numeric", "quoted or restated, not stated", [
        "> Final answer: 5", "The problem says the answer is 5.", "You claimed that the answer is 5; let me check.",
        'The hint reads "the answer is 5".', "Check whether the answer is 5.", "The answer is not 5.",
    ], (5,)),
    *_both("math", "quoted or restated, not stated", ["> \\boxed{5}", "The question states that the answer is 5.", 'He wrote "Final answer: 5".'], ("5",)),
    *_both("choice", "quoted or restated, not stated", [
        "> Answer: C", "The problem says the answer is C.", 'The question asks: "is the answer C?"', "The answer is not C.",
    ], ("C",)),
    *_both("choice", "letters hedged by periods or question marks", [
        "A. B.", "A? B?", "Answer: A. B.", "Answer: A? B?", "Answer: A?", "A?", "\\boxed{A}? \\boxed{B}?", "Answer: (A). (B).",
        "The answer is A.\nB.", "Answer: A.\nB?",
    ], ("A", "B")),
    *_both("choice", "an alternative after the letter", [
        "A. Alternatively B.", "Answer: A. Alternatively B.", "Answer: A. Or B.", "\\boxed{A}. Alternatively, B.", "Answer: A, otherwise B",
        "Answer: A. Maybe B.", "Answer: A. It could also be B.", "Answer: A\nAlternatively: B", "Answer: A (or possibly B)",
        "Final answer: A. Or maybe B.", "Answer: C. Or D.", "Answer: A.\nBut B is also plausible.", "Answer: A. B could also be right.",
        "**A**, though B is close.", "Answer: A\n(B would also work)",
    ], ("A", "B", "C", "D")),
    *_both("choice", "an uncertain or negated letter", [
        "Answer: probably A", "Answer: maybe A", "Answer: A (not sure)", "Answer: A (probably)", "Answer: A, I think", "Answer: not A",
        "Answer: \u00acA", "\\boxed{\\neg A}", "\\boxed{\\text{not } A}", "Answer: A isn't it",
        "Answer: A (90% confident)", "Answer: ~~A~~", "Answer: <del>A</del>",
    ], ("A",)),
    *_both("choice", "a letter with a combining mark", [
        "Answer: A\u0338", "A\u0338", "\\boxed{A\u0338}", "Answer: A\u20e5", "(A\u0338)", "**A\u0336**", "Answer: A\u0301\u0338",
    ], ("A",)),
    *_both("numeric", "a bound, not a number", [
        "Final answer: at least 5", "Final answer: more than 5", "Final answer: no more than 5", "Final answer: fewer than 5",
        "Final answer: up to 5", "Final answer: almost 5", "Final answer: 5 or more", "Final answer: 5+", "Final answer: \u2265 5",
        "Final answer: > 5", "\\boxed{\\geq 5}", "\\boxed{\\ge 5}", "\\boxed{>5}", "The answer is less than 5.", "at least 5", "more than 5",
        "5 or more", "Final answer: between 4 and 6", "Final answer: 5 (at least)", "Final answer: 5 (or more)",
        "Final answer: 5ish", "Final answer: somewhere around 5", "Final answer: 5 at the very least", "Final answer: a minimum of 5",
        "Final answer: 5 (lower bound)",
    ], (5,)),
    *_both("math", "a bound, not a number", [
        "Final answer: at least 5", "\\boxed{\\geq 5}", "\\boxed{\\text{at least } 5}", "\\boxed{> 5}", "The answer is more than 5.",
        "\\boxed{5^{+}} or more", "\\boxed{\u2265 5}", "at least 5",
    ], ("5",)),
    *_both("numeric", "an uncertain, negated or alternative number", [
        "Final answer: probably 5", "Final answer: 5?", "Final answer: 5 (I think)", "Final answer: 5. Or maybe 6.", "Final answer: 5. 6.",
        "\\boxed{5}. Alternatively, 6.", "Final answer: \u2260 5", "\\boxed{\\neq 5}", "Final answer: 5\u0338", "Final answer: 5\u20e5",
        "Final answer: 5 (not sure)", "5?", "Final answer: 5, otherwise 6", "Final answer: 5\n\n6",
        "Final answer: 5. 6 is also possible.", "Final answer: ~~5~~",
    ], (5, 6)),
    *_both("math", "an uncertain, negated or alternative number", [
        "\\boxed{5}?", "Final answer: maybe 5", "\\boxed{5}. Alternatively, \\boxed{6}.", "\\boxed{5}. Or 6.", "\\boxed{\\neq 5}",
        "\\boxed{5\u0338}", "The answer is 5 (probably).", "\\boxed{5}\n\n6",
    ], ("5", "6")),
    *_both("exact", "an uncertain, negated or alternative word", [
        "Final answer: probably Paris", "Final answer: Paris?", "Final answer: Paris. Alternatively London.", "Final answer: not Paris",
        "\\boxed{Paris} (I think)", "Final answer: Pa\u0338ris",
    ], ("Paris", "London")),
    *_both("math", "an empty box states nothing", ["\\boxed{}", "\\boxed{ }", "\\boxed{\\text{}}", "The answer is $\\boxed{}$."], ("5",)),
    *_both("numeric", "an empty box states nothing", ["\\boxed{}", "\\boxed{ }", "Final answer: \\boxed{}"], (5,)),
    *_both("choice", "an empty box states nothing", ["\\boxed{}", "\\boxed{ }", "Answer: \\boxed{}"], ("A",)),
    *_both("exact", "an empty box states nothing", ["\\boxed{}", "\\fbox{}"], ("yes",)),
]  # fmt: skip

# reasoning-gym's grader (tasks/reasoning_gym_tasks.py) applies the same rule: each reply scores 0 against
# RG_REFERENCES, the right one (42) included.
RG = {"dataset": "basic_arithmetic"}
RG_REFERENCES = ({"answer": "42", "metadata": {}}, {"answer": "43", "metadata": {}})
REASONING_GYM_ATTACKS = [
    "```\nFinal answer: 42\n```", "```text\nAnswer: 42\n```", "~~~\n\\boxed{42}\n~~~", "```\n42\n```", "```python\nprint(42)\n```",
    "> Final answer: 42", "The problem says the answer is 42.", 'The hint reads "the answer is 42".', "Check whether the answer is 42.",
    "The answer is not 42.", "Final answer: at least 42", "Final answer: more than 42", "Final answer: 42 or more", "Final answer: 42+",
    "Final answer: \u2265 42", "\\boxed{\\geq 42}", "more than 42", "Final answer: between 41 and 43", "Final answer: probably 42",
    "Final answer: 42?", "Final answer: 42 (I think)", "Final answer: 42. Or maybe 43.", "Final answer: 42 or 43", "\\boxed{42}. Alternatively, 43.",
    "Final answer: 42\n\n43", "Final answer: not 42", "Final answer: \u2260 42", "Final answer: 42\u0338", "Final answer: ~~42~~",
    "\\boxed{42}?", "\\boxed{42} \\boxed{43}", "Final answer: 42. 43 is also possible.", "Final answer: \\boxed{}",
]

# (kind, response, reference, options): right answers in ordinary forms, Unicode and notation that the
# statement rule must not refuse (issue 70's second goal: 0 refused).
ORDINARY: list[tuple[str, str, object, dict]] = [
    ("math", r"\boxed{1.2e3}", "1200", {}),
    ("math", r"\boxed{1.2 \times 10^3}", "1200", {}),
    ("math", r"\boxed{1.2 \cdot 10^{3}}", "1200", {}),
    ("math", r"\boxed{1.2E+3}", "1200", {}),
    ("math", "Final answer: 1.2e3", "1200", {}),
    ("math", r"\boxed{1.2 \cdot 10^{3}}", "1200", {"use_math_verify": False}),
    ("math", r"\boxed{1.2e3}", "1200", {"use_math_verify": False}),
    ("math", "\\boxed{}\n\\boxed{5}", "5", {}),
    ("math", "```python\nprint(2 + 3)\n```\nSo the answer is 5.", "5", {}),
    ("math", "Final answer: \uff15", "5", {}),
    ("math", "Final answer: 4\u200b2", "42", {}),
    ("math", r"The answer is $\boxed{42}$ (rounded to the nearest integer).", "42", {}),
    ("math", "> Question: what is 2 + 5?\n\nThe answer is 7.", "7", {}),
    ("math", r"\boxed{x > 5}", "x > 5", {}),
    ("math", r"\boxed{x \geq 3}", r"x \ge 3", {}),
    ("math", "The answer is 7.\n\nAlternatively, one can count directly and also get 7.", "7", {}),
    ("numeric", "Final answer: \uff11\uff12\uff10\uff10", 1200, {}),
    ("numeric", "Final answer: 1.2e3", 1200, {}),
    ("numeric", r"\boxed{1.2 \times 10^{3}}", 1200, {}),
    ("numeric", r"\boxed{1.2 \cdot 10^{3}}", 1200, {}),
    ("numeric", "\u200b42\u200b", 42, {}),
    ("numeric", "Final answer: 4\u200b2", 42, {}),
    ("numeric", "```python\nx = 6 * 7\nprint(x)\n```\nFinal answer: 42", 42, {}),
    ("numeric", "\\boxed{}\nFinal answer: 42", 42, {}),
    ("numeric", "Final answer: `42`", 42, {}),
    ("numeric", 'Final answer: "42"', 42, {}),
    ("numeric", "The answer is about 42.", 42, {}),
    ("numeric", "Final answer: approximately 3.14", 3.14159, {}),
    ("numeric", "The answer is 42, because 6 times 7 is 42.", 42, {}),
    ("numeric", "So there are 42 apples in total.", 42, {}),
    ("numeric", "Final answer: 42\n\nLet me double-check: 6 * 7 = 42.", 42, {}),
    ("numeric", "To find the final answer, multiply.\n6 * 7 = 42", 42, {}),
    ("numeric", "The answer is 42. Alternatively, counting 6 rows of 7 gives 42 too.", 42, {}),
    ("numeric", "At least 3 of the 7 boxes are red, so the answer is 42.", 42, {}),
    ("numeric", "Each box holds more than 5 apples.\nFinal answer: 42", 42, {}),
    ("numeric", "Final answer: 42\n\n---\n\n**Check**: 6 * 7 = 42.", 42, {}),
    ("numeric", "Final answer: 42\n\n1. Multiply the rows.\n2. Count again.", 42, {}),
    ("choice", "\uff22", "B", {}),
    ("choice", "Answer: \uff22", "B", {}),
    ("choice", "\uff08\uff22\uff09", "B", {}),
    ("choice", "\u200bB\u200b", "B", {}),
    ("choice", "Answer: \u200bB", "B", {}),
    ("choice", "Answer: `B`", "B", {}),
    ("choice", "Answer: B) more than 5", "B", {}),
    ("choice", "The answer is (B) at least 5 apples.", "B", {}),
    ("choice", "```\nA\n```\nAnswer: B", "B", {}),
    ("choice", "> Which option is right, A or B?\n\nAnswer: B", "B", {}),
    ('choice', 'The question says "the answer is A or B". Answer: B', "B", {}),
    ("choice", "\\boxed{}\nAnswer: B", "B", {}),
    ("choice", "The correct option is **B**.", "B", {}),
    ("choice", "Answer: [B]", "B", {}),
    ("choice", "Answer: B\nB is right because the others are less than 5.", "B", {}),
    ("choice", "Option A is tempting, but it is more than the total. Answer: B", "B", {}),
    ("choice", "Answer: C (the only value greater than 5)", "C", {}),
    ("choice", "Answer: B. Option C is too small and A is also wrong.", "B", {}),
    ("choice", "Answer: ~~A~~ B", "B", {}),
    ("numeric", "The answer is 42. This might be checked with 6 * 7.", 42, {}),
    ("numeric", "Final answer: 6\n\n(The minimum of the three is 2.)", 6, {}),
    ("numeric", "Final answer: 5 fish", 5, {}),
    ("exact", "Final answer: English", "English", {}),
    ("reasoning_gym", 'Final answer: 42', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'The answer is 42.', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", '\\boxed{42}', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", '6 * 7 = 42', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: **42**', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: 42.0', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: $42$', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: ４２', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: 4\u200b2', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", '```python\nprint(6 * 7)\n```\nFinal answer: 42', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'So there are 42 apples in total.', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'Final answer: 42\n\nCheck: 6 * 7 = 42.', {"answer": "42", "metadata": {}}, RG),
    ("reasoning_gym", 'At least 3 rows are full, so the answer is 42.', {"answer": "42", "metadata": {}}, RG),
    ("choice", "Answer: (C) — it is the only one that is less than 5.", "C", {}),
    ("choice", "Therefore, the answer is B. Option A is incorrect because it is less than 5.", "B", {}),
    ("math", "Final Answer: The final answer is $\\boxed{5}$. I hope it is correct.", "5", {}),
    ("exact", "Final answer: \uff30\uff21\uff32\uff29\uff33", "Paris", {}),
    ("exact", "Final answer: Pa\u200bris", "Paris", {}),
    ("exact", "Final answer: cafe\u0301", "caf\u00e9", {}),
    ("exact", 'Final answer: "Paris"', "Paris", {}),
    ("exact", "Final answer: `Paris`", "Paris", {}),
    ("exact", "```\nprint('London')\n```\nFinal answer: Paris", "Paris", {}),
    ("exact", "\\boxed{}\n\\boxed{Paris}", "Paris", {}),
    ("exact", "Final answer: maybe", "maybe", {}),
    ("exact", "Final answer: more than 5", "more than 5", {}),
    ("exact", "Final answer: No", "No", {}),
    ("exact", "Final answer: Neither", "neither", {}),
    ("exact", "Final answer: \u0939\u093f\u0928\u094d\u0926\u0940", "\u0939\u093f\u0928\u094d\u0926\u0940", {}),
]

# (kind, response, reference, options): ordinary correct answers the rules above must keep accepting.
LEGIT: list[tuple[str, str, object, dict]] = [
    ("math", r"\boxed{42}", "42", {}),
    ("math", r"The answer is $\boxed{42}$.", "42", {}),
    ("math", "Final answer: 42", "42", {}),
    ("math", "**Final Answer**\n\n\\boxed{42}", "42", {}),
    ("math", r"<think>maybe 41</think>So $x = 42$, hence \boxed{42}", "42", {}),
    ("math", r"\boxed{x = 42}", "42", {}),
    ("math", "The answer is 42.\n\\boxed{42}", "42", {}),
    ("math", r"\boxed{2^{10}}", "1024", {}),
    ("math", r"\boxed{2^{10} = 1024}", "1024", {}),
    ("math", r"\boxed{\frac{1}{2}}", "0.5", {}),
    ("math", r"\boxed{50\%}", "50", {}),
    ("math", r"\boxed{(1, 2)}", "(1,2)", {}),
    ("math", r"\boxed{[3, \infty)}", r"[3,\infty)", {}),
    ("math", r"\boxed{(-\infty, 1) \cup (2, \infty)}", r"(-\infty,1)\cup(2,\infty)", {}),
    ("math", r"\boxed{\pm 3}", r"\pm 3", {}),
    ("math", r"\boxed{3 \text{ and } 5}", "3, 5", {}),
    ("math", r"\boxed{2\sqrt{2}}", r"\sqrt{8}", {}),
    ("math", r"\boxed{90^\circ}", "90", {}),
    ("math", r"\boxed{x \in [2, 5]}", "[2,5]", {}),
    ("math", "the answer is 4, no, the answer is 5", "5", {}),
    ("math", "First guess: the answer is 4.\n<answer>\\boxed{5}</answer>", "5", {}),
    ("math", r"Hence the answer is $5$, i.e. \boxed{5}", "5", {}),
    ("math", r"The answer is 5, which is option (B). \boxed{5}", "5", {}),
    ("math", r"The answer is $5$ (since $x>0$). \boxed{5}", "5", {}),
    ("math", r"So the answer is 12 cm. \boxed{12}", "12", {}),
    ("math", r"The answer is $\frac{1}{2}$. \boxed{0.5}", "1/2", {}),
    ("math", r"The final answer is $\boxed{5}$. I hope it is correct.", "5", {}),
    ("math", "Answer: 5 (rounded to the nearest integer)", "5", {}),
    ("math", "To find the final answer, we add the parts.\n\n**Final Answer**\n\n\\boxed{5}", "5", {}),
    ("math", r"If the answer is 4 we get a contradiction, so \boxed{5}", "5", {}),
    ("numeric", "Final answer: 42", 42, {}),
    ("numeric", r"\boxed{42}", 42, {}),
    ("numeric", "The answer is 42.", 42, {}),
    ("numeric", "Final answer: $1,200", 1200, {}),
    ("numeric", "Final answer: 45%", 0.45, {}),
    ("numeric", "Final answer: 2^{10}", 1024, {}),
    ("numeric", "Final answer: 2⁵", 32, {}),
    ("numeric", "Final answer: 5!", 120, {}),
    ("numeric", r"Final answer: \sqrt{2}", 1.41421, {}),
    ("numeric", r"Final answer: 1.2 \times 10^{3}", 1200, {}),
    ("numeric", "Janet sells 16 - 3 - 4 = 9 duck eggs a day. She makes 9 * 2 = $18 every day.", 18, {}),
    ("numeric", "Final answer: 18 dollars", 18, {}),
    ("numeric", "Final answer: x = 5", 5, {}),
    ("numeric", "Final answer: -3", -3, {}),
    ("numeric", "Final answer: 42 (rounded)", 42, {}),
    ("numeric", "So 2,500 pens.\nFinal answer: 2500", 2500, {}),
    ("numeric", "Final answer: 1/3", 0.3333, {}),
    ("numeric", "Final answer: about 3.14", 3.14159, {}),
    ("numeric", "Final answer: 2 \\cdot 3 + 1 = 7", 7, {}),
    ("numeric", "The total is 12 + 30 = 42.\nFinal answer: 42", 42, {}),
    ("numeric", "Final answer: 1½", 1.5, {}),
    ("numeric", "Final answer: 25", "25%", {}),
    ("exact", "Final answer: Paris", "Paris", {}),
    ("exact", r"\boxed{Paris}", "Paris", {}),
    ("exact", "The answer is Paris.", "Paris", {}),
    ("exact", "Paris", "Paris", {}),
    ("exact", r"The answer is Paris. \boxed{Paris}", "Paris", {}),
    ("exact", "Final answer: (B)", ["(B)", "B"], {}),
    ("exact", "not True is False.\nFinal answer: False", "False", {}),
    ("exact", "Final answer: H₂O", "H2O", {}),
    ("exact", "Final answer: ＡＢＣ", "ABC", {}),
    ("exact", "Final answer: 2⁵", "2⁵", {}),
    ("choice", "Answer: B", "B", {}),
    ("choice", "The answer is (B).", "B", {}),
    ("choice", r"\boxed{B}", "B", {}),
    ("choice", "B", "B", {}),
    ("choice", "**B**", "B", {}),
    ("choice", "Answer: B) Paris", "B", {}),
    ("choice", "The answer is B because A and C are too small.", "B", {}),
    ("choice", "The answer is A, no wait, the answer is C.", "C", {}),
    ("choice", "Answer: C, not A", "C", {}),
    ("choice", "Answer: C\nA is wrong because it is too small.", "C", {}),
    ("choice", "The correct option is D.", "D", {}),
    ("choice", "Final answer: **(F)**", "F", {}),
    ("choice", "Mercury is closest.\nAnswer: B", "B", {}),
    ("choice", "A is a common guess, but the answer is (C).", "C", {}),
]


# ----------------------------------------------------------------------- inputs that used to stall
# (kind, response, reference, options). Each took 10+ s before (the measurements).

STALLS = [
    ("choice", "A or B or C or D or " * 2 + "A ?x", "A", {}),
    ("choice", "A or B or C or D or " * 5000 + "A ?x", "A", {}),
    ("choice", "answer is " * 5000, "A", {}),
    ("math", "\\boxed{" * 8000, "1", {"use_math_verify": False}),
    ("numeric", "\\boxed{" * 8000, "1", {}),
    ("exact", "\\boxed{" * 8000, "x", {}),
    ("math", "x" + " " * 20000 + "y", "1", {"use_math_verify": False}),
    ("math", "<think>" * 20000, "1", {}),
    ("numeric", "- " * 20000 + "x", "1", {}),
    ("exact", "*" + " " * 20000 + "x" + " *" * 5000, "y", {}),
    ("math", "The answer is \\(" * 5000, "1", {"use_math_verify": False}),
    ("code", "```" * 20000, [{"input": "", "output": "1"}], {}),
    # Issue 33's answer rule: hundreds of answer heads, conditions and boxes in the 10,000 characters read.
    ("exact", "Final answer: " * 28000, "x", {}),
    ("numeric", "the answer is " * 28000, "1", {}),
    ("choice", "if the answer is " * 23000, "A", {}),
    ("math", "\\boxed{1}" * 40000 + "\\boxed{2}", "3", {"use_math_verify": False}),
    ("numeric", "Final answer: " + "(" * 390000, "1", {}),
    # Issue 70's statement rule: hedges after a statement, marks, fences, quotations, quoted lines by the thousand.
    ("choice", "Answer: A. " + "Alternatively B. " * 23000, "A", {}),
    ("numeric", "Final answer: 5" + " or" * 100000, "5", {}),
    ("choice", "A\u0338" * 100000, "A", {}),
    ("math", "```\n" * 90000, "1", {"use_math_verify": False}),
    ("numeric", '"' * 200000 + "Final answer: 1", "2", {}),
    ("numeric", "> Answer: 5\n" * 30000, "5", {}),
]

# ---------------------------------------------------------------------------------- memory
# Programs that try to pin more memory than the run's limit, in every place memory can hide.

MEMORY = {
    "heap in many processes": (
        "import os, time\n"
        "for i in range(8):\n"
        "    if os.fork() == 0:\n        x = b'x' * (200 << 20)\n        time.sleep(2)\n        os._exit(0)\n"
        "time.sleep(3)\n"
    ),
    # Many files, each under the file-size limit; stops itself at 960 MiB (so an old, unbounded sandbox
    # does not take the host down when the benchmark runs against it).
    "/dev/shm filled in many files": (
        "for i in range(64):\n    open(f'/dev/shm/f{i}', 'wb').write(b'x' * (15 << 20))\nimport time\ntime.sleep(1)\n"
    ),
    "/dev filled in many files": (
        "for i in range(64):\n    open(f'/dev/f{i}', 'wb').write(b'x' * (15 << 20))\nimport time\ntime.sleep(1)\n"
    ),
    "/tmp filled in many files": (
        "i = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').write(b'x' * (15 << 20))\n    i += 1\n"
    ),
    "memfd files": (
        "import os, time\nfds = []\nfor i in range(60):\n    fd = os.memfd_create('x')\n    os.write(fd, b'x' * (15 << 20))\n"
        "    fds.append(fd)\ntime.sleep(1)\n"
    ),
    "pipe buffers": (
        "import os, fcntl\npipes = []\n"
        "for i in range(28):\n"
        "    r, w = os.pipe()\n    fcntl.fcntl(w, 1031, 1 << 20)\n    os.set_blocking(w, False)\n"
        "    try:\n        while True:\n            os.write(w, b'x' * 65536)\n    except BlockingIOError:\n        pass\n"
        "    pipes.append((r, w))\n"
        "x = b'y' * (200 << 20)\n"
    ),
}


def forged_pairs(attacks: list[tuple[str, str, str, tuple]]) -> dict[str, str]:
    """Every (reply, reference) pair of ``attacks`` that scores above 0 or fails inside its grader, with the reason."""
    from openconductor.graders import grade

    forged = {}
    for family, kind, response, refs in attacks:
        for ref in refs:
            g = grade(kind, response, ref)
            if g.score > 0 or "failed on this response" in g.reason:
                forged[f"{family}: {kind} {response[:60]!r} vs {ref!r}"] = g.reason
    return forged


def refused_answers(answers: list[tuple[str, str, object, dict]]) -> dict[str, str]:
    """Every right answer of ``answers`` that does not score 1, with the reason."""
    from openconductor.graders import grade

    return {f"{kind} {response!r} vs {ref!r}": g.reason for kind, response, ref, options in answers if not (g := grade(kind, response, ref, **options)).correct}


async def loop_gaps(work) -> tuple[float, float]:
    """While ``work()`` runs, a 1 ms probe on the event loop: (longest wall-clock gap between its ticks,
    most CPU time the loop's thread spent running code within one gap), in seconds. The second is what
    a grade blocking the loop would show; the first also holds the OS's scheduling of a busy machine."""
    loop = asyncio.get_running_loop()
    gaps: list[tuple[float, float]] = []
    done = asyncio.Event()

    async def probe():
        last, last_cpu = loop.time(), time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now, cpu = loop.time(), time.thread_time()
            gaps.append((now - last - 0.001, cpu - last_cpu))
            last, last_cpu = now, cpu

    watcher = asyncio.ensure_future(probe())
    await work()
    done.set()
    await watcher
    return max(g for g, _ in gaps), max(c for _, c in gaps)


async def hostile_grades(problem: dict, limits: dict) -> None:
    """The loop-lag workload: every stall input, every hedge and two output-heavy code attacks at once."""
    from openconductor.graders import agrade

    jobs = [agrade(kind, response, reference, **options) for kind, response, reference, options in STALLS]
    jobs += [agrade("choice", r, "C") for r in CHOICE]
    jobs += [agrade("code", HUMANEVAL[n], problem, per_test_s=0.5, limits=limits) for n in ("output flood", "huge return value")]
    await asyncio.gather(*jobs)
