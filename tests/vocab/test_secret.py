"""Secret never shows its value."""

from __future__ import annotations

import logging
import pickle
import traceback

import pytest

from harness_core import Secret

VALUE = "test-key-0123456789"


def test_secret_is_masked_everywhere() -> None:
    secret = Secret(VALUE)
    shown = [
        repr(secret),
        str(secret),
        f"{secret}",
        f"{secret!r}",
        f"{secret:>30}",
        repr([secret]),
        repr({"k": secret}),
    ]
    assert all(VALUE not in text for text in shown)
    assert secret.get_secret_value() == VALUE


def test_secret_absent_from_logs_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    secret = Secret(VALUE)
    with caplog.at_level(logging.INFO):
        logging.getLogger("harness").info("using key %s and %r", secret, secret)
    assert VALUE not in caplog.text
    try:
        raise RuntimeError(f"request failed with {secret}")
    except RuntimeError:
        assert VALUE not in traceback.format_exc()


def test_secret_equality_and_hash() -> None:
    assert Secret(VALUE) == Secret(VALUE)
    assert Secret(VALUE) != Secret("other-key")
    assert Secret(VALUE) != VALUE
    assert len({Secret(VALUE), Secret(VALUE)}) == 1


def test_secret_rejects_bad_values_and_pickling() -> None:
    with pytest.raises(TypeError, match="expects a str"):
        Secret(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="may not be empty"):
        Secret("")
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(Secret(VALUE))


def test_mask_strings_masks_every_string_and_key_and_keeps_other_values() -> None:
    from harness_core import mask_strings

    def redact(text: str) -> str:
        return text.replace("k3y", "****")

    data = {"k3y-name": ["a k3y", ("k3y", 3)], "n": None, "f": 1.5, "b": True}
    assert mask_strings(data, redact) == {"****-name": ["a ****", ["****", 3]], "n": None, "f": 1.5, "b": True}


def test_secret_masking_masks_nothing_until_the_harness_hands_its_masker_over() -> None:
    from harness_core import SecretMasking

    sink = SecretMasking()
    data = {"route": "k3y"}
    assert sink.mask_data(data) is data
    assert sink.mask_text("k3y") == "k3y"
    assert sink.mask_text(None) is None
    sink.use_redactor(lambda text: text.replace("k3y", "****"))
    assert sink.mask_data(data) == {"route": "****"}
    assert sink.mask_text("a k3y") == "a ****"
    assert sink.mask_text(None) is None
