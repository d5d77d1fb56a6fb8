"""LiveCodeBench code generation, stdin/stdout problems (AtCoder/Codeforces).

LeetCode-style "functional" problems need a call harness the code grader does not define, so they are
left out (counted in the task's source line). Private tests in the hub release are base64(zlib(pickle(
json))); they are decoded with an unpickler that refuses every global, so only plain strings load.
"""

import base64
import io
import json
import pickle
import zlib

from .base import INSTRUCTIONS, Question, Task, TaskError, load_rows, need, register_task

HOW = (
    "Get it with `datasets` (hub id livecodebench/code_generation_lite, version_tag release_v1, split test; "
    "needs trust_remote_code) or pass --data FILE.jsonl with columns question_id, question_content, "
    "public_test_cases (JSON list of {input, output, testtype}), private_test_cases (same, or the hub's encoding)."
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


@register_task("livecodebench", description="LiveCodeBench stdin/stdout problems (hub: livecodebench/code_generation_lite)", how_to_get=HOW, aliases=("lcb",))
def build(*, limit=None, data=None, seed=0, split="test", private_tests=True) -> Task:
    rows, source = load_rows(data, hub_id="livecodebench/code_generation_lite", split=split, how_to_get=HOW)
    questions, skipped = [], 0
    for i, row in enumerate(rows):
        cases = decode_cases(row.get("public_test_cases"))
        if private_tests:
            cases += decode_cases(row.get("private_test_cases"))
        if not cases or any(c.get("testtype", "stdin") != "stdin" for c in cases):
            skipped += 1
            continue
        content = need(row, "question_content", "question", source=source)
        starter = row.get("starter_code") or ""
        prompt = content + (f"\n\nStarter code:\n```python\n{starter}\n```" if starter else "")
        prompt += "\n\nRead from standard input and write to standard output."
        questions.append(
            Question(
                id=str(row.get("question_id", i)),
                prompt=prompt,
                reference=[{"input": c["input"], "output": c["output"]} for c in cases],
                grader="code",
                metadata={"domain": "code", "platform": row.get("platform"), "difficulty": row.get("difficulty")},
            )
        )
    return Task("livecodebench", questions, INSTRUCTIONS["code"], domain="code", source=f"{source} ({skipped} functional/untested problems left out)")
