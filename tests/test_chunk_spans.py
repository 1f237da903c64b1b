"""Chunk spans, as the sweep and a pattern's scripts both place them (core/text.py's
``placed``, copied beside the scripts as text.py)."""

import pytest

from ragsweep.core.text import placed


def test_overlapping_pieces_are_placed_in_order_each_after_the_one_before():
    text = "one two. one two. three"
    pieces = ["one two.", "one two.", "two. three"]
    assert list(placed(text, pieces)) == [(0, 8), (9, 17), (13, 23)]


def test_a_piece_with_other_white_space_points_at_the_texts_own_characters():
    text = "alpha\n\nbeta  gamma"
    [(start, end)] = placed(text, ["alpha beta gamma"])
    assert text[start:end] == text


def test_a_piece_that_is_not_in_the_text_is_an_error_quoting_it():
    with pytest.raises(ValueError, match="chunk not found in its document: 'delta'"):
        list(placed("alpha beta", ["alpha", "delta"]))
