"""Token counts come from real tiktoken (offline); placeholders have the fixed format."""

from __future__ import annotations

import tiktoken

from agent_memory.placeholders import clean_description, format_memory_ref, is_valid_key, parse_memory_refs
from agent_memory.tokens import count_tokens, encoding_name_for, seed_tiktoken_cache, truncate_to_tokens


def test_tiktoken_files_are_seeded_for_offline_use() -> None:
    cache = seed_tiktoken_cache()
    assert len(list(cache.iterdir())) >= 2


def test_counts_match_tiktoken_itself() -> None:
    text = "npm ERR! code ERESOLVE — 依存関係 🚀\n" * 50
    assert count_tokens(text) == len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert count_tokens(text, "gpt-4") == len(tiktoken.get_encoding("cl100k_base").encode_ordinary(text))


def test_encoding_is_chosen_by_model_name() -> None:
    assert encoding_name_for("gpt-4o-mini") == "o200k_base"
    assert encoding_name_for("gpt-4") == "cl100k_base"
    assert encoding_name_for("llama3.1:8b") == "cl100k_base"


def test_special_token_text_is_counted_not_rejected() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_truncate_to_tokens_keeps_a_prefix_within_the_limit() -> None:
    text = "word " * 1000
    cut = truncate_to_tokens(text, 10)
    assert text.startswith(cut) and count_tokens(cut) <= 10


def test_placeholder_format_is_fixed_and_parses_back() -> None:
    ref = format_memory_ref("cmd_abc123", "npm install output", 2340)
    assert ref == "[MemoryRef: cmd_abc123 - npm install output - 2340 tokens]"
    (parsed,) = parse_memory_refs(f"Logs stored in {ref}. Status: Success.")
    assert (parsed.key, parsed.description, parsed.tokens) == ("cmd_abc123", "npm install output", 2340)


def test_descriptions_are_cleaned_so_placeholders_always_parse() -> None:
    ugly = "multi\nline [brackets] - dashes - " + "x" * 500
    ref = format_memory_ref("k1", ugly, 5)
    (parsed,) = parse_memory_refs(ref)
    assert parsed.key == "k1" and "\n" not in parsed.description and len(parsed.description) <= 160
    assert clean_description("   ") == "stored content"


def test_key_shape() -> None:
    assert is_valid_key("cmd_1a2b3c") and is_valid_key("a.b:c-d_e")
    assert not any(is_valid_key(k) for k in ["", "-x", "a b", "x" * 256, "ключ", None])
