"""Reading a written answer as one number: the whole expression, or a refusal saying why.

``read_number("2^{10} = 1024")`` is 1024 (every side of an equation must agree), ``"\\sqrt{2}"`` is
1.414…, ``"2⁵"`` 32, ``"5!"`` 120, ``"$1.2 million"`` 1,200,000, ``"45%"`` 45 with its percent sign
noted. An answer is never read as its first or last number: ``"3 or 5"``, ``"3 = 5"``, ``"\\log 5"``
(no agreed base), ``"1e400"`` (not a finite float) raise :class:`Unreadable` with the reason. Nor is a
calculation an answer: ``"-284 * 982 - 246"`` (a sum, difference or product) is refused unless an
equation gives its value (``"... = -279134"``); powers, roots, fractions, factorials and "× 10^k" are
ways to write one number and are read.

Words before the expression ("about", "x =") and after it (units, "in total") are dropped; a word
inside it is refused, except the few that change the value and are read: percent, hundred/thousand/
million/billion/trillion, and a leading "minus"/"negative". Work is linear in the text and bounded:
floats only (an overflow is a refusal), nesting at most :data:`MAX_DEPTH`, factorials up to 170.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from .extract import unicode_to_latex, vulgar_fractions

__all__ = ["MAX_DEPTH", "Side", "Unreadable", "read_number"]

MAX_DEPTH = 40
MAX_TOKENS = 400

_SCALES = {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_CONSTS = {"e": math.e, "\\pi": math.pi, "pi": math.pi, "π": math.pi, "\\mathrm{e}": math.e}
# Words and commands that would change the value if they were dropped as prose: refused, not read.
_CHANGES_VALUE = frozenset(
    "squared cubed factorial half twice double triple quarter third dozen dozens lakh crore bn mn "
    "times over divided power root sqrt log ln lg exp sin cos tan cot sec csc arcsin arccos arctan "
    "sinh cosh tanh inverse reciprocal plus and or to not no never".split()
)
# A scale letter glued to a number ("5k", "2M", "3bn") is ambiguous (thousand? kelvin? metres?): refused.
_SCALE_SUFFIXES = frozenset("k K m M b B bn mn".split())
_PROSE_PUNCT = frozenset(":,;.?\"'“”‘’`«»")
_APPROX_WORDS = frozenset("about approximately approx around roughly nearly almost circa ca".split())

_TOKEN = re.compile(
    r"(?P<num>(?:\d{1,3}(?:,\d{3})++(?!\d)|\d++)(?:\.\d++)?(?:[eE][-+]?\d++)?|\.\d++(?:[eE][-+]?\d++)?)"
    r"|(?P<cmd>\\[A-Za-z]++|\\.)"
    r"|(?P<word>[^\W\d_]++)"
    r"|(?P<op>\*\*|[-+*/^(){}\[\]!=≈×·÷−%])"
    r"|(?P<cur>US\$|[$€£¥₹])"
    r"|(?P<space>\s++)"
    r"|(?P<other>.)",
    re.S,
)
_CLEAN = [
    (re.compile(r"\\\$"), "$"),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\{,\}"), ","),
    (re.compile(r"\\(?:left|right|big|Big|bigg|Bigg|displaystyle|!)(?![A-Za-z])"), ""),
    (re.compile(r"\^\s*+\{?\s*+\\circ\s*+\}?|°"), " "),  # degrees: a unit
    (re.compile(r"\\(?:text|mathrm|textrm|textbf|mathbf|mbox|operatorname)\s*+\{([^{}]*+)\}"), r" \1 "),
    (re.compile(r"(?<=\d)(?:\\[ ,;:]|[ \u2009\u202f])(?=\d{3}(?!\d))"), ""),  # 1\,000 / 1 000
    (re.compile(r"\\[ ,;:]|~|\\[()\[\]]"), " "),
]
_OPS = {"×": "*", "·": "*", "÷": "/", "−": "-", "**": "^", "\\times": "*", "\\cdot": "*", "\\ast": "*",
        "\\div": "/", "\\approx": "≈", "\\simeq": "≈", "\\{": "{", "\\}": "}"}  # fmt: skip


class Unreadable(ValueError):
    """The text is not one number; the message says why."""


@dataclass(frozen=True)
class Side:
    """One side of the answer (an equation has several): its value, whether it ended in a percent, and
    whether it is arithmetic (a sum, difference or product) rather than a way to write one number."""

    value: float
    percent: bool = False
    computed: bool = False


@dataclass
class _Tok:
    kind: str  # num, const, op, cmd, word, cur, punct, scale, pct
    text: str
    value: float = 0.0


def _tokens(text: str) -> list[_Tok]:
    for pattern, repl in _CLEAN:
        text = pattern.sub(repl, text)
    out: list[_Tok] = []
    prev_end = -1
    for m in _TOKEN.finditer(text):
        kind, tok = m.lastgroup or "other", m.group()
        if kind == "space":
            continue
        if len(out) >= MAX_TOKENS:
            raise Unreadable(f"longer than {MAX_TOKENS} tokens")
        token = _classify(kind, _OPS.get(tok, tok))
        if token.kind == "word" and token.text in _SCALE_SUFFIXES and out and out[-1].kind == "num" and m.start() == prev_end:
            raise Unreadable(f"{out[-1].text}{token.text}: a scale letter is ambiguous; write the number")
        out.append(token)
        prev_end = m.end()
    return _join_percent_words(out)


def _classify(kind: str, tok: str) -> _Tok:
    low = tok.lower()
    if kind == "num":
        return _Tok("num", tok, float(tok.replace(",", "")))
    if tok in _CONSTS:
        return _Tok("const", tok, _CONSTS[tok])
    if tok in ("*", "/", "≈", "{", "}") or kind == "op":
        return _Tok("pct" if tok == "%" else "op", tok)
    if kind == "word" and low in _SCALES:
        return _Tok("scale", low, _SCALES[low])
    if kind == "word" and low in ("percent", "pct"):
        return _Tok("pct", low)
    if kind in ("cmd", "word", "cur"):
        return _Tok(kind, tok)
    return _Tok("punct", tok)


def _join_percent_words(toks: list[_Tok]) -> list[_Tok]:
    """"per cent" is one percent sign."""
    out: list[_Tok] = []
    for t in toks:
        if t.kind == "word" and t.text.lower() == "cent" and out and out[-1].kind == "word" and out[-1].text.lower() == "per":
            out[-1] = _Tok("pct", "per cent")
        else:
            out.append(t)
    return out


def _trim(toks: list[_Tok]) -> tuple[list[_Tok], bool]:
    """Drop the prose around the expression: leading words, labels ("x ="), trailing units and
    remarks. Returns (the expression's tokens, negated by a leading "minus"/"negative")."""
    start, negate = 0, False
    while start < len(toks) and _is_prose(toks[start]):
        negate = toks[start].text.lower() in ("minus", "negative")
        start += 1
    while start < len(toks) and toks[start].text in ("=", "≈", ":"):
        start += 1
    end = len(toks)
    while end > start:
        last = toks[end - 1]
        if _is_prose(last) or last.kind in ("punct", "cur") and last.text not in (")", "]"):
            end -= 1
        elif last.text == ")" and (opened := _remark_start(toks, start, end)) is not None:
            end = opened  # "42 (rounded)"
        else:
            break
    return toks[start:end], negate


def _is_prose(tok: _Tok) -> bool:
    if tok.kind == "cur" or tok.kind == "punct" and tok.text in _PROSE_PUNCT:
        return True
    if tok.kind != "word":
        return False
    low = tok.text.lower()
    return low not in _CHANGES_VALUE or low in ("minus", "negative") or low in _APPROX_WORDS


def _remark_start(toks: list[_Tok], start: int, end: int) -> Optional[int]:
    """Where a trailing parenthesised remark without numbers ("(rounded)") opens, else None."""
    depth = 0
    for i in range(end - 1, start - 1, -1):
        t = toks[i]
        depth += t.text == ")"
        depth -= t.text == "("
        if t.kind in ("num", "const"):
            return None
        if depth == 0:
            return i if any(x.kind == "word" for x in toks[i:end]) else None
    return None


def _mixed_numbers(text: str) -> str:
    """"1½" (a mixed number) and "½" as decimal literals: one number's notation, not a sum."""
    if text.isascii():
        return text

    def literal(m: re.Match) -> str:
        return repr(int(m.group(1) or 0) + unicodedata.numeric(m.group(2)))

    return re.sub(rf"(\d*+)({vulgar_fractions().pattern})", literal, text)


def read_number(text: str) -> list[Side]:
    """Every side of the one expression ``text`` states ("2^{10} = 1024" has two, both 1024), or
    :class:`Unreadable`. A percent is noted, not applied: ``Side(45, percent=True)`` for "45%"."""
    toks, negate = _trim(_tokens(unicode_to_latex(_mixed_numbers(text))))
    toks = [t for t in toks if t.kind != "cur"]  # "9 * 2 = $18": a currency sign never changes the value
    if not any(t.kind in ("num", "const") for t in toks):
        raise Unreadable("no number")
    for t in toks:
        if t.kind in ("word", "punct", "cur") or t.kind == "cmd" and t.text not in ("\\frac", "\\dfrac", "\\tfrac", "\\cfrac", "\\sqrt"):
            what = "words" if t.kind == "word" else repr(t.text)
            raise Unreadable(f"{what} inside the answer ({t.text!r}): not one number")
    sides, current, depth = [], [], 0
    for t in toks:
        depth += t.text in "({[" if t.kind == "op" else 0
        depth -= t.text in ")}]" if t.kind == "op" else 0
        if t.text in ("=", "≈") and depth == 0:
            sides.append(current)
            current = []
        else:
            current.append(t)
    sides.append(current)
    out = [_side(s) for s in sides]
    if out[-1].computed:
        # "-284 * 982 - 246" restates a calculation; its value is what the answer must say ("... = -279134").
        raise Unreadable("an arithmetic expression, not its value (a sum, difference or product is not an answer)")
    if negate:
        out = [Side(-s.value, s.percent, s.computed) for s in out]
    return out


def _side(toks: list[_Tok]) -> Side:
    if not toks:
        raise Unreadable("an empty side of an equation")
    percent = toks[-1].kind == "pct"
    if percent:
        toks = toks[:-1]
    scale = 1.0
    while toks and toks[-1].kind == "scale":
        scale *= toks[-1].value
        toks = toks[:-1]
    if any(t.kind in ("pct", "scale") for t in toks):
        raise Unreadable("a percent or a scale word inside an expression")
    parser = _Parser(toks)
    value = parser.parse() * scale
    if not math.isfinite(value):
        raise Unreadable(f"not a finite number ({value})")
    return Side(value, percent, parser.computed)


class _Parser:
    """Recursive descent over + - * / ^ ! ( ) \\frac \\sqrt, with floats and a depth bound."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks, self.i, self.depth = toks, 0, 0
        self.computed = False  # a binary + - * (not "× 10^k"): arithmetic, not one number's notation

    def parse(self) -> float:
        value = self.expr()
        if self.i != len(self.toks):
            raise Unreadable(f"unexpected {self.toks[self.i].text!r}: not one expression")
        return value

    def peek(self) -> Optional[_Tok]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text == text:
            self.i += 1
            return True
        return False

    def expr(self) -> float:
        return self.nested(self._sum)

    def _sum(self) -> float:
        value = self.term()
        while (tok := self.peek()) is not None and tok.text in ("+", "-") and tok.kind == "op":
            self.i += 1
            self.computed = True
            value = _checked(value + self.term() if tok.text == "+" else value - self.term())
        return value

    def scientific(self) -> bool:
        """Is the next factor ``10^k`` (as in "1.2 \\times 10^{3}")?"""
        nxt = self.toks[self.i : self.i + 2]
        return len(nxt) == 2 and nxt[0].kind == "num" and nxt[0].text == "10" and nxt[1].text == "^"

    def term(self) -> float:
        value = self.unary()
        while (tok := self.peek()) is not None:
            if tok.kind == "op" and tok.text in ("*", "/"):
                self.i += 1
                self.computed = self.computed or tok.text == "*" and not self.scientific()
                right = self.unary()
                if tok.text == "/" and right == 0:
                    raise Unreadable("division by zero")
                value = value * right if tok.text == "*" else value / right
            elif tok.kind in ("const", "cmd") or tok.text == "(":  # 2\pi, 3\sqrt{2}, 2(3+1)
                self.computed = self.computed or tok.text == "("
                value *= self.unary()
            else:
                break
            value = _checked(value)
        return value

    def nested(self, fn):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unreadable(f"nested deeper than {MAX_DEPTH}")
        value = fn()
        self.depth -= 1
        return value

    def unary(self) -> float:
        if self.take("-"):
            return -self.nested(self.unary)
        if self.take("+"):
            return self.nested(self.unary)
        base = self.postfix()
        if not self.take("^"):
            return base
        exponent = self.nested(self.unary)
        try:
            return _checked(math.pow(base, exponent))
        except (OverflowError, ValueError) as exc:
            raise Unreadable(f"{base:g}^{exponent:g} has no finite real value ({exc})") from None

    def postfix(self) -> float:
        value = self.primary()
        while self.take("!"):
            if value != int(value) or not 0 <= value <= 170:
                raise Unreadable(f"{value:g}! is not a factorial of a whole number up to 170")
            value = float(math.factorial(int(value)))
        return value

    def primary(self) -> float:
        tok = self.peek()
        if tok is None:
            raise Unreadable("the expression ends early")
        self.i += 1
        if tok.kind in ("num", "const"):
            return _checked(tok.value)
        for opening, closing in (("(", ")"), ("{", "}"), ("[", "]")):
            if tok.text == opening:
                value = self.expr()
                if not self.take(closing):
                    raise Unreadable(f"unbalanced {opening!r}")
                return value
        if tok.text in ("\\frac", "\\dfrac", "\\tfrac", "\\cfrac"):
            num, den = self.argument(), self.argument()
            if den == 0:
                raise Unreadable("division by zero")
            return _checked(num / den)
        if tok.text == "\\sqrt":
            return self.root()
        raise Unreadable(f"unexpected {tok.text!r}: not one expression")

    def argument(self) -> float:
        """A LaTeX argument: ``{…}`` or one digit (``\\frac12``)."""
        tok = self.peek()
        if tok is not None and tok.kind == "num" and tok.text.isdigit() and len(tok.text) <= 2:
            if len(tok.text) == 2:  # \frac12: the 1 is this argument, the 2 the next
                self.toks[self.i] = _Tok("num", tok.text[1], float(tok.text[1]))
                return float(tok.text[0])
            self.i += 1
            return tok.value
        if not self.take("{"):
            raise Unreadable("a \\frac or \\sqrt without its {argument}")
        value = self.expr()
        if not self.take("}"):
            raise Unreadable("unbalanced '{'")
        return value

    def root(self) -> float:
        degree = 2.0
        if self.take("["):
            degree = self.expr()
            if not self.take("]") or degree != int(degree) or degree < 2:
                raise Unreadable("a root's degree must be a whole number of at least 2")
        x = self.argument()
        if x < 0 and degree % 2 == 0:
            raise Unreadable(f"an even root of {x:g} is not real")
        return math.copysign(abs(x) ** (1.0 / degree), x)


def _checked(value: float) -> float:
    if not math.isfinite(value):
        raise Unreadable("the value overflows a float")
    return value
