"""The one rule for model replies (openconductor.reply), property-tested, and its users agree on it."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from openconductor.executor import final_answer
from openconductor.graders.extract import final_segment as grader_segment
from openconductor.records import StepRecord
from openconductor.reply import AnswerStream, answer_block, answer_text, final_segment, strip_think
from openconductor.workflow import clean_output

# Replies built from tag pieces, partial tags, case variants and plain text: where the edge cases live.
PIECES = ["<think>", "</think>", "<THINK>", "</Think>", "<answer>", "</answer>", "<ANSWER>", "<", ">", "<th", "ink>",
          "</thi", "<ans", "wer>", "/", " ", "\n", "a", "B", "42", "x < y", "<thinking>"]
replies = st.lists(st.sampled_from(PIECES), max_size=14).map("".join) | st.text(max_size=40)
plain = st.text(alphabet=st.characters(blacklist_characters="<"), max_size=20)


def _has_orphan_close(text: str) -> bool:
    """A </think> while none is open: the one case a stream cannot match (it cannot take text back)."""
    import re

    depth_open = False
    for m in re.finditer(r"<(/?)think>", text, re.I):
        if m.group(1) and not depth_open:
            return True
        depth_open = not m.group(1) if not depth_open else not bool(m.group(1))
    return False


@settings(max_examples=400, deadline=None)
@given(replies, st.lists(st.integers(1, 6), min_size=1, max_size=40))
def test_stream_pieces_concatenate_to_answer_text(text, cuts):
    if _has_orphan_close(text):
        return
    stream, out, i, k = AnswerStream(), "", 0, 0
    while i < len(text):
        n = cuts[k % len(cuts)]
        out += stream.feed(text[i : i + n])
        i, k = i + n, k + 1
    out += stream.finish()
    assert out == answer_text(text)


@given(st.lists(st.tuples(plain, plain), max_size=5), plain)
def test_thinking_never_leaks(segments, tail):
    text = "".join(f"{visible}<think>{thought}</think>" for visible, thought in segments) + tail
    assert strip_think(text) == "".join(v for v, _ in segments) + tail


@given(plain, replies)
def test_a_reply_that_opens_mid_thought_drops_the_thought(thought, rest):
    assert strip_think(f"{thought}</think>{rest}") == strip_think(rest)


@given(plain, plain)
def test_an_unclosed_thought_holds_no_answer(visible, thought):
    assert strip_think(f"{visible}<think>{thought}") == visible
    assert answer_text(f"{visible}<think>{thought}") == visible.strip()


@given(replies)
def test_executor_and_graders_read_the_same_text(text):
    # The executor's final answer and the grader's segment (when there is no <answer> block) are the
    # same text: neither may see thinking the other drops.
    step = StepRecord(index=0, worker=0, worker_name="w", subtask="s", access=[], status="ok", output=text)
    assert final_answer([step]) == answer_text(text)
    if answer_block(strip_think(text)) is None:
        assert grader_segment(text) == final_segment(text) == strip_think(text).strip()


@given(plain, plain, st.booleans())
def test_the_plan_parser_never_sees_thinking(before, after, mid_thought):
    secret = "§secret plan§"
    text = f"{before}{secret}</think>{after}" if mid_thought else f"{before}<think>{secret}</think>{after}"
    assert secret not in clean_output(text)
    assert secret not in clean_output(f"{before}<think>{secret}")  # a truncated thought


def test_examples():
    assert answer_text("<think>hmm 41?</think>The result: <answer>42</answer>") == "The result: 42"
    assert answer_text("<think>never closed") == ""
    assert answer_text("I weigh A and B.</think>So: B") == "So: B"
    assert final_segment("<think>x</think>work <answer>7</answer> and <answer>8") == "8"
    assert answer_block("no tags") is None


def test_hostile_tag_floods_are_linear():
    # The old patterns took ~10 s on "<think>" * 20000 (a rescan from every tag); linear takes ~0.05 s.
    for text in ("<think>" * 20000, "</think>" * 20000, "<answer>" * 20000, "<think" * 20000, "<" * 100000):
        t = time.perf_counter()
        strip_think(text), answer_text(text), final_segment(text)
        assert time.perf_counter() - t < 1.0, text[:20]
        t = time.perf_counter()
        stream = AnswerStream()
        for i in range(0, len(text), 7):  # ~20k tokens: constant work per token
            stream.feed(text[i : i + 7])
        assert time.perf_counter() - t < 3.0, text[:20]
