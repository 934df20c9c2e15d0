"""Masking: registered secrets become *** in text, bytes and a stream fed in any pieces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock.secrets.masking import MIN_LENGTH, Masker, is_sensitive

SECRET = "hunter2-secret"


def masker_of(*secrets: object) -> Masker:
    masker = Masker()
    for secret in secrets:
        masker.add(secret)
    return masker


def test_every_occurrence_of_every_secret_is_masked():
    masker = masker_of(SECRET, "other-pass")
    assert masker.mask(f"a {SECRET} b {SECRET}other-pass") == "a *** b ******"


def test_the_longest_secret_wins_where_two_overlap():
    assert masker_of("abcdef", "abcdefgh").mask("xabcdefghx") == "x***x"


def test_short_values_are_not_masked():
    assert masker_of("a" * (MIN_LENGTH - 1)).mask("aaaa banana") == "aaaa banana"


def test_nested_values_and_their_json_escaped_form_are_masked():
    masker = masker_of({"user": ["first-secret", {"deep": 'quo"te-secret'}]})
    assert masker.mask('first-secret {"v": "quo\\"te-secret"}') == '*** {"v": "***"}'


def test_bytes_are_masked_as_their_utf8_encoding():
    assert masker_of("pässwörd-1").mask_bytes("x pässwörd-1 y".encode()) == b"x *** y"


def test_a_multi_line_secret_is_masked_whole():
    key = "-----BEGIN KEY-----\nMIIabc\n-----END KEY-----"
    assert masker_of(key).mask(f"key:\n{key}\ndone") == "key:\n***\ndone"


@pytest.mark.parametrize(("name", "sensitive"), [("db_password", True), ("API_KEY", True), ("my_apikey", True),
                                                 ("Authorization", True), ("aws_secret_access_key", True),
                                                 ("private_key", True), ("region", False), ("owner", False)])
def test_sensitive_names_are_airflows(name, sensitive):
    assert is_sensitive(name) is sensitive


@given(st.lists(st.integers(min_value=0, max_value=120), max_size=8), st.sampled_from(["", "\n", "x"]))
def test_a_stream_fed_in_any_pieces_masks_as_the_whole_does(cuts, between):
    text = f"start {SECRET}{between}ab{SECRET[:5]} two-line\nsecret\n{SECRET}{SECRET} end-hunt".encode()
    masker = masker_of(SECRET, "two-line\nsecret")
    stream = masker.stream()
    pieces, last = [], 0
    for cut in sorted(min(cut, len(text)) for cut in cuts):
        pieces.append(stream.feed(text[last:cut]))
        last = cut
    pieces.append(stream.feed(text[last:]))
    pieces.append(stream.close())
    assert b"".join(pieces) == masker.mask_bytes(text)


def test_a_stream_holds_back_only_what_could_begin_a_secret():
    stream = masker_of(SECRET).stream()
    assert stream.feed(b"line one\nhunt") == b"line one\n"  # "hunt" may begin the secret
    assert stream.feed(b"ing season\n") == b"hunting season\n"


def test_a_secret_registered_later_is_masked_from_then_on():
    masker = Masker()
    stream = masker.stream()
    assert stream.feed(b"before: late-secret\n") == b"before: late-secret\n"
    masker.add("late-secret")
    assert stream.feed(b"after: late-secret\n") == b"after: ***\n"
