"""The notes beside a step of a grouped-query layer: which heads share a group's keys and values,
and the KV cache's size against one key/value head per query head, counted here from the sizes."""
import tracer
from tracer.step_notes import notes


def test_grouped_heads_say_whose_keys_they_read_and_what_sharing_saves():
    trace = tracer.run("gqa")                       # 4 query heads, 2 groups, 5 tokens, d_k = d_v = 2
    text = " ".join(notes(trace, trace.step("h3.scores")))
    assert "group 1 (kv1.k, kv1.v) is read by heads 2, 3" in text
    assert f"= {2 * 5 * (2 + 2)} numbers, against {4 * 5 * (2 + 2)}" in text and "2× smaller" in text


def test_multi_query_is_four_times_smaller_and_full_heads_have_no_note():
    trace = tracer.run("mqa")
    assert "4× smaller" in notes(trace, trace.step("h2.weights"))[0]
    plain = tracer.run("multi_head")
    assert notes(plain, plain.step("h1.weights")) == []
