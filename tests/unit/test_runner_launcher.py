"""How the warm launcher shares a batch of tries among runners."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.runner.spares import _shares


@given(st.lists(st.text(max_size=3), max_size=100), st.integers(min_value=1, max_value=12))
def test_shares_keep_order_hold_at_most_so_many_and_are_as_few_and_even_as_can_be(lines, most):
    shares = _shares(lines, most)
    assert [line for share in shares for line in share] == lines
    assert all(0 < len(share) <= most for share in shares)
    assert len(shares) == -(-len(lines) // most)
    assert not shares or max(map(len, shares)) - min(map(len, shares)) <= 1
