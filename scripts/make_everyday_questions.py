"""Writes src/openconductor/data/questions/everyday.jsonl: everyday and knowledge questions of our own.

Written for this project (Apache-2.0, like the code; see data/questions/README.md). Knowledge answers are
typed here by hand; every computable reference (conversions, percentages, weekdays, clock times, Roman
numerals, numbers in words) is computed below, so the file is reproducible:
    PYTHONPATH=src python scripts/make_everyday_questions.py
Each row: id, category, question, answer (a string, or a list of accepted strings for exact grading),
grader (exact | numeric), grader_options, split (train | test). Every category has questions in both
splits, alternating, so the test split never repeats a training question.
"""

import datetime
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/openconductor/data/questions/everyday.jsonl"
TOL = {"rel_tol": 0.01}  # conversions: 1 % covers the usual rounded factors (2.54, 1.609, 2.2046)

CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Egypt", "Cairo"),
            ("Kenya", "Nairobi"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Norway", "Oslo"), ("Peru", "Lima"),
            ("Thailand", "Bangkok"), ("Poland", "Warsaw"), ("Portugal", "Lisbon"), ("Argentina", "Buenos Aires"),
            ("Germany", "Berlin"), ("Ireland", "Dublin")]
SYMBOLS = [("gold", "Au"), ("iron", "Fe"), ("sodium", "Na"), ("potassium", "K"), ("silver", "Ag"), ("lead", "Pb"),
           ("oxygen", "O"), ("helium", "He"), ("copper", "Cu"), ("carbon", "C")]
CONTINENTS = [("Kenya", "Africa"), ("Chile", "South America"), ("Vietnam", "Asia"), ("Sweden", "Europe"), ("Mexico", "North America"),
              ("Nigeria", "Africa"), ("Mongolia", "Asia"), ("Colombia", "South America")]
PLURALS = [("mouse", "mice"), ("child", "children"), ("tooth", "teeth"), ("goose", "geese"), ("woman", "women"), ("cactus", ["cacti", "cactuses"]),
           ("leaf", "leaves"), ("person", "people")]
SPELLINGS = [("definately", "definitely"), ("recieve", "receive"), ("seperate", "separate"), ("occured", "occurred"),
             ("accomodate", "accommodate"), ("tommorow", "tomorrow"), ("wierd", "weird"), ("neccessary", "necessary")]
FACTS = [("How many legs does a spider have?", "8"), ("How many days are there in a leap year?", "366"),
         ("How many minutes are there in a day?", "1440"), ("How many sides does a hexagon have?", "6"),
         ("How many planets are there in the Solar System?", "8"), ("How many hours are there in a week?", "168"),
         ("How many months of the year have 31 days?", "7"), ("How many seconds are there in an hour?", "3600")]
ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
ROMAN = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def words(n: int) -> str:
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    rest = n % 100
    return ONES[n // 100] + " hundred" + ("" if rest == 0 else " and " + words(rest))


def roman(n: int) -> str:
    out = ""
    for value, letters in ROMAN:
        while n >= value:
            out, n = out + letters, n - value
    return out


def clock(h: int, m: int) -> list[str]:
    """Accepted forms of a time of day: 24-hour and 12-hour."""
    twelve = f"{(h - 1) % 12 + 1}:{m:02d}"
    half = "am" if h < 12 else "pm"
    return list(dict.fromkeys([f"{h:02d}:{m:02d}", f"{h}:{m:02d}", f"{twelve} {half}", f"{twelve} {half.upper()}", f"{twelve}{half}", f"{twelve} {half[0]}.m."]))


def numeric(category, question, value):
    return {"category": category, "question": question, "answer": f"{value:g}" if isinstance(value, float) else str(value), "grader": "numeric",
            "grader_options": TOL if category == "unit conversion" else {}}


def exact(category, question, answer):
    return {"category": category, "question": question, "answer": answer, "grader": "exact", "grader_options": {}}


def rows() -> list[dict]:
    out = [exact("capital", f"What is the capital of {c}?", a if a != "Buenos Aires" else [a]) for c, a in CAPITALS]
    out += [exact("chemical symbol", f"What is the chemical symbol of {e}?", s) for e, s in SYMBOLS]
    out += [exact("continent", f"On which continent is {c}?", a) for c, a in CONTINENTS]
    out += [exact("plural", f"What is the plural of '{w}'?", p) for w, p in PLURALS]
    out += [exact("spelling", f"Which spelling is correct: '{bad}' or '{good}'?" if i % 2 else f"Which spelling is correct: '{good}' or '{bad}'?", good)
            for i, (bad, good) in enumerate(SPELLINGS)]
    out += [numeric("fact", q, a) for q, a in FACTS]
    conversions = [(5, "kilometres", "metres", 1000), (3, "hours", "minutes", 60), (2.5, "litres", "millilitres", 1000), (12, "inches", "centimetres", 2.54),
                   (10, "miles", "kilometres", 1.609344), (70, "kilograms", "pounds", 2.20462), (4, "feet", "inches", 12), (90, "minutes", "hours", 1 / 60),
                   (3, "kilograms", "grams", 1000), (26.2, "miles", "kilometres", 1.609344)]
    out += [numeric("unit conversion", f"How many {to} are there in {x:g} {frm}?", round(x * k, 3)) for x, frm, to, k in conversions]
    out += [numeric("unit conversion", f"What is {c} degrees Celsius in degrees Fahrenheit?", c * 9 / 5 + 32) for c in (25, 100, -10, 37)]
    percents = [(15, 240), (20, 85), (12.5, 64), (30, 150), (8, 250), (45, 60)]
    out += [numeric("percentage", f"What is {p:g}% of {n}?", p * n / 100) for p, n in percents]
    out += [numeric("percentage", f"A jacket costs ${price} and is {off}% off. What is the sale price in dollars?", price * (100 - off) / 100)
            for price, off in ((80, 25), (120, 15), (45, 20), (60, 10))]
    out += [numeric("percentage", f"A bill is ${bill}. How much is {'an' if tip in (8, 11, 18) else 'a'} {tip}% tip, in dollars?", bill * tip / 100) for bill, tip in ((50, 18), (40, 15))]
    dates = [datetime.date(1976, 7, 4), datetime.date(2000, 1, 1), datetime.date(1969, 7, 20), datetime.date(2024, 2, 29), datetime.date(1989, 11, 9),
             datetime.date(2012, 12, 21), datetime.date(1990, 10, 3), datetime.date(2021, 3, 14)]
    out += [exact("weekday", f"What day of the week was {d.day} {d:%B} {d.year}?", d.strftime("%A")) for d in dates]
    times = [(10, 30, 2, 45), (23, 15, 1, 50), (7, 40, 5, 30), (14, 5, 3, 55), (9, 0, 8, 30), (16, 45, 4, 25)]
    for h, m, dh, dm in times:
        total = (h * 60 + m + dh * 60 + dm) % (24 * 60)
        out.append(exact("clock time", f"What time is it {dh} hour{'s' if dh != 1 else ''} and {dm} minutes after {h:02d}:{m:02d}? Answer in 24-hour HH:MM.", clock(total // 60, total % 60)))
    out += [exact("roman numerals", f"Write {n} in Roman numerals.", roman(n)) for n in (1994, 2024, 49, 388, 1666, 14)]
    out += [exact("number in words", f"Write the number {n} in words.", list(dict.fromkeys([words(n), words(n).replace("-", " "), words(n).replace(" and ", " ")])))
            for n in (47, 13, 90, 215, 68, 101)]
    for i, row in enumerate(out):
        row["split"] = "test" if i % 2 else "train"
    return [{"id": f"everyday-{i:03d}", **row} for i, row in enumerate(out)]


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = rows()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data))
    print(f"{len(data)} questions ({sum(r['split'] == 'test' for r in data)} test) -> {OUT}")
