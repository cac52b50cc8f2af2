"""The fair order's sort by keys then id (`order._sort_by_keys_then_id`) against one Python sort."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.order import _sort_by_keys_then_id


@given(
    st.lists(st.tuples(st.integers(-1, 1), st.sampled_from([0.0, 1.0, 2.5])), max_size=40),
    st.sampled_from(["ascending", "descending", "shuffled", "nearly"]),
    st.randoms(use_true_random=False),
)
@settings(max_examples=300, deadline=None, database=None)
def test_charts_whose_keys_tie_come_in_id_order_whatever_the_queue_order(
    keys: list[tuple[int, float]], layout: str, rng: random.Random
) -> None:
    """Ids in queue order ascending, descending, shuffled, or ascending with a few swaps (stretches
    of the queue in id order, as a snapshot reads them): the sort is (keys, id) every time."""
    ids = [f"c{index:03d}" for index in range(len(keys))]
    if layout == "descending":
        ids.reverse()
    elif layout == "shuffled":
        rng.shuffle(ids)
    elif layout == "nearly" and len(ids) > 1:
        for _ in range(2):
            i, j = rng.randrange(len(ids)), rng.randrange(len(ids))
            ids[i], ids[j] = ids[j], ids[i]
    priority = np.array([key[0] for key in keys], dtype=np.int64)
    created = np.array([key[1] for key in keys], dtype=np.float64)
    charts = np.array(sorted(rng.sample(range(len(keys)), rng.randint(0, len(keys)))), dtype=np.intp)
    ordered = _sort_by_keys_then_id(charts, [-priority, created], ids)
    expected = sorted(charts.tolist(), key=lambda chart: (-priority[chart], created[chart], ids[chart]))
    assert ordered.tolist() == expected
