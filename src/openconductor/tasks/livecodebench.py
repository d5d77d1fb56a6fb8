"""LiveCodeBench code generation: stdin/stdout problems (AtCoder/Codeforces) and LeetCode-style
"functional" problems, which the code grader runs call-based (``{"fn_name", "tests"}``: one JSON
argument per input line, the return value compared as JSON). A problem whose function name cannot be
found (metadata ``func_name``, else the starter code's last ``def``), or that mixes test types, is
left out and counted in the task's source line. Private tests in the hub release are base64(zlib(
pickle(json))); they are decoded with an unpickler that refuses every global, so only plain strings load.
"""

import base64
import io
import json
import pickle
import re
import zlib

from .base import INSTRUCTIONS, Question, Task, TaskError, load_rows, need, register_task

HOW = (
    "Get it with `datasets` (hub id livecodebench/code_generation_lite, version_tag release_v1, split test; "
    "needs trust_remote_code) or pass --data FILE.jsonl with columns question_id, question_content, "
    "public_test_cases (JSON list of {input, output, testtype}), private_test_cases (same, or the hub's encoding), "
    "and for functional problems starter_code and metadata ({\"func_name\": ...})."
)


class _StringsOnly(pickle.Unpickler):
    def find_class(self, module, name):  # a plain str pickle needs no globals
        raise pickle.UnpicklingError(f"refusing global {module}.{name} in test data")


def decode_cases(value) -> list[dict]:
    if not value:
        return []
    if isinstance(value, list):
        return value
    text = str(value)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        raw = zlib.decompress(base64.b64decode(text))
        return json.loads(_StringsOnly(io.BytesIO(raw)).load())
    except Exception as exc:
        raise TaskError(f"cannot decode LiveCodeBench test cases: {type(exc).__name__}: {exc}") from exc


def function_name(row: dict) -> str | None:
    """The function a functional problem's tests call: metadata ``func_name``, else the starter code's last def."""
    meta = row.get("metadata") or {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            meta = {}
    name = meta.get("func_name") if isinstance(meta, dict) else None
    if isinstance(name, str) and name.isidentifier():
        return name
    defs = re.findall(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", row.get("starter_code") or "", flags=re.M)
    return defs[-1] if defs else None


@register_task("livecodebench", description="LiveCodeBench stdin/stdout and functional problems (hub: livecodebench/code_generation_lite)", how_to_get=HOW, aliases=("lcb",))
def build(*, limit=None, data=None, seed=0, split="test", private_tests=True) -> Task:
    rows, source = load_rows(data, hub_id="livecodebench/code_generation_lite", split=split, how_to_get=HOW)
    questions, skipped = [], 0
    for i, row in enumerate(rows):
        cases = decode_cases(row.get("public_test_cases"))
        if private_tests:
            cases += decode_cases(row.get("private_test_cases"))
        kinds = {c.get("testtype", "stdin") for c in cases}
        fn_name = function_name(row) if kinds == {"functional"} else None
        if kinds != {"stdin"} and fn_name is None:
            skipped += 1
            continue
        content = need(row, "question_content", "question", source=source)
        starter = row.get("starter_code") or ""
        prompt = content + (f"\n\nStarter code:\n```python\n{starter}\n```" if starter else "")
        tests = [{"input": c["input"], "output": c["output"]} for c in cases]
        if fn_name is None:
            prompt += "\n\nRead from standard input and write to standard output."
            reference: list | dict = tests
        else:
            prompt += f"\n\nComplete `{fn_name}`: it is called with the test arguments and its return value is checked."
            reference = {"fn_name": fn_name, "tests": tests}
        questions.append(
            Question(
                id=str(row.get("question_id", i)),
                prompt=prompt,
                reference=reference,
                grader="code",
                metadata={"domain": "code", "platform": row.get("platform"), "difficulty": row.get("difficulty")},
            )
        )
    return Task("livecodebench", questions, INSTRUCTIONS["code"], domain="code", source=f"{source} ({skipped} problems without usable tests left out)")
