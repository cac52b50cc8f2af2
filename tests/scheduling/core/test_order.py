"""The fair order's sorts: by keys then id (`order._sort_by_keys_then_id`) against one Python sort, and
`order.stable_argsort` (16-bit radix passes) against numpy's stable argsort."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.order import _ranked_argsort, _sort_by_keys_then_id, stable_argsort


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


EXAMPLES = settings(max_examples=300, deadline=None, database=None)
# Spans on both sides of the two radix limits (2**16 and 2**32) and of int64's ends.
SPANS = st.sampled_from([1, 3, 2**16 - 1, 2**16, 2**16 + 1, 2**32 - 1, 2**32, 2**32 + 7, 2**40])
BASES = st.sampled_from([0, -5, 2**62, -(2**63), 2**63 - 2**41, 12345])


@st.composite
def integer_keys(draw: st.DrawFn) -> np.ndarray:
    base, span = draw(BASES), draw(SPANS)
    least, most = max(base, -(2**63)), min(base + span, 2**63 - 1)
    # Few distinct values, so that ties (where stability shows) are common, the extremes among them.
    values = [*draw(st.lists(st.integers(least, most), min_size=1, max_size=6)), least, most]
    return np.array(draw(st.lists(st.sampled_from(values), max_size=60)), dtype=np.int64)


@EXAMPLES
@given(integer_keys())
def test_integer_keys_sort_as_numpy_sorts_them(keys: np.ndarray) -> None:
    assert stable_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()


@EXAMPLES
@given(integer_keys(), st.sampled_from([0.0, 0.5, 1e-9, np.inf, np.nan]))
def test_float_keys_sort_as_numpy_sorts_them(keys: np.ndarray, odd: float) -> None:
    """Whole floats (a deficit round is a ceiling) take the radix path; a fraction, an infinity or a
    nan among them sends all of them to numpy's sort."""
    floats = keys.astype(np.float64)
    if len(floats):
        floats[len(floats) // 2] += odd
    assert stable_argsort(floats).tolist() == np.argsort(floats, kind="stable").tolist()


def test_a_million_round_numbers_sort_as_numpy_sorts_them() -> None:
    rounds = np.random.default_rng(7).integers(0, 200_000, size=1_000_000)
    assert np.array_equal(stable_argsort(rounds), np.argsort(rounds, kind="stable"))
    assert np.array_equal(stable_argsort(rounds.astype(np.float64)), np.argsort(rounds, kind="stable"))


@EXAMPLES
@given(st.lists(st.sampled_from([-0.0, 0.0, 0.5, 2.25, -1e300, 1e300, -np.inf, np.inf]), min_size=1, max_size=80))
def test_ranked_keys_sort_as_numpy_sorts_them(values: list[float]) -> None:
    """The ranked sort (fractions, infinities, wide spans): ties, -0.0 beside 0.0 among them, stay
    in index order."""
    keys = np.array(values, dtype=np.float64)
    assert _ranked_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()
    assert stable_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def test_a_million_creation_times_with_expected_ones_sort_as_numpy_sorts_them() -> None:
    """Whole seconds shared by many charts, then expected charts a fraction of a second apart."""
    rng = np.random.default_rng(11)
    created = np.concatenate((np.floor(rng.uniform(0, 86_400, 1_000_000)), rng.uniform(0, 3_000, 250_000)))
    assert np.array_equal(stable_argsort(created), np.argsort(created, kind="stable"))
