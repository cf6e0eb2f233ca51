"""Who may reach a served cockpit (issue 28): the token, the origin, the Host header
written back into the page, the printed lines, the command each tab runs; what a
client may send a tab (issue 43)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cockpit.common.net import is_loopback
from cockpit.serve.access import (
    cookie_name,
    new_token,
    reach,
    safe_host,
    same_origin,
    token_matches,
)
from cockpit.serve.server import TAB_DRIVER, face_command
from cockpit.serve.tabs import MAX_COLUMNS, MAX_ROWS, STDIN_LIMIT, checked


def test_tokens_are_long_random_and_match_only_themselves() -> None:
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200 and all(len(t) >= 32 for t in tokens)
    token = tokens.pop()
    assert token_matches(token, token)
    assert not token_matches(None, token) and not token_matches("", token)
    assert not token_matches(token[:-1], token) and not token_matches(token + "x", token)
    assert not token_matches(token.upper() if token.upper() != token else "x", token)


@given(st.text(max_size=64))
def test_no_other_text_matches_a_token(text: str) -> None:
    token = new_token()
    assert token_matches(text, token) is (text == token)


def test_two_ports_keep_two_cookies() -> None:
    assert cookie_name(8765) != cookie_name(8766)


def test_a_websocket_must_come_from_the_page_itself() -> None:
    assert same_origin("http://127.0.0.1:8765", "127.0.0.1:8765")
    assert same_origin("http://localhost:9000", "localhost:9000")  # a tunnel's own port
    assert not same_origin("http://evil.example", "127.0.0.1:8765")
    assert not same_origin("http://127.0.0.1:8766", "127.0.0.1:8765")
    assert not same_origin("null", "127.0.0.1:8765")  # a sandboxed frame, a file: page
    assert not same_origin("file://127.0.0.1:8765", "127.0.0.1:8765")
    assert same_origin(None, "127.0.0.1:8765")  # no browser page: the token decides


def test_only_a_plain_host_is_written_back_into_the_page() -> None:
    assert safe_host("127.0.0.1:8765") == "127.0.0.1:8765"
    assert safe_host("[::1]:8765") == "[::1]:8765"
    assert safe_host("box.example:80") == "box.example:80"
    for hostile in ('x"><script>alert(1)</script>', "a b", "h:1/../", "", None, "a" * 300,
                    "host:123456", "h\r\nSet-Cookie: x"):
        assert safe_host(hostile) is None, hostile


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.5", "::", "box.example"))


def test_the_printed_lines_name_the_tunnel_with_the_ssh_port() -> None:
    lines = reach("127.0.0.1", 8765, "TOKEN", ssh_user="me", ssh_host="203.0.113.7",
                  ssh_port=40022)
    assert lines.url == "http://127.0.0.1:8765/?token=TOKEN"
    assert lines.tunnel == "ssh -N -L 8765:127.0.0.1:8765 -p 40022 me@203.0.113.7"
    assert lines.warning is None
    v6 = reach("127.0.0.1", 8765, "T", ssh_user="me", ssh_host="2001:db8::1", ssh_port=None)
    assert v6.tunnel == "ssh -N -L 8765:127.0.0.1:8765 me@2001:db8::1"
    wide = reach("0.0.0.0", 8765, "T", ssh_user="me", ssh_host="h", ssh_port=22)
    assert wide.tunnel is None and wide.warning and "plain HTTP" in wide.warning


def _args(**over: object) -> argparse.Namespace:
    base = {"interval": 1.0, "read_only": False, "theme": None, "simulate_gpus": None,
            "machine": None}
    base.update(over)
    return argparse.Namespace(**base)


def test_each_tab_runs_the_tui_with_every_word_quoted(tmp_path: Path) -> None:
    hostile = tmp_path / "camp; touch PWNED $(id) `x`.yaml"
    words = shlex.split(face_command(_args(read_only=True, simulate_gpus=8, machine=2),
                                     hostile))
    # A served tab says so to the other faces ("conducted by serve, pid …"), and its
    # driver ends it when the server is gone.
    assert words[:7] == ["COCKPIT_FACE=serve", f"TEXTUAL_DRIVER={TAB_DRIVER}", sys.executable,
                         "-m", "cockpit", "tui", str(hostile)]
    assert "--read-only" in words
    assert words[words.index("--simulate-gpus") + 1] == "8"
    assert words[words.index("--machine") + 1] == "2"
    assert "--read-only" not in shlex.split(face_command(_args(), hostile))


def test_a_client_message_reaches_a_tab_only_as_the_page_would_send_it() -> None:
    assert checked('["stdin", "s"]') == ("stdin", "s")
    assert checked('["resize", {"width": 120, "height": 40}]') == ("resize", (120, 40))
    # A size no terminal has is clamped; one that is not a number is dropped.
    assert checked('["resize", {"width": 1000000000, "height": -3}]') == (
        "resize", (MAX_COLUMNS, 1))
    assert checked('["resize", {"width": 1000000000, "height": 1000000000}]') == (
        "resize", (MAX_COLUMNS, MAX_ROWS))
    for dropped in ('["resize", {"width": "x", "height": 2}]', '["resize", {"width": true, '
                    '"height": 2}]', '["resize", [1, 2]]', '["stdin", 5]', '["stdin"]',
                    '{"stdin": "s"}', '["quit"]', '["exit", {}]', "[]", "not json", '"s"',
                    f'["stdin", "{"a" * (STDIN_LIMIT + 1)}"]', '[1, "s"]', '["ping", {}]'):
        assert checked(dropped) is None, dropped
    assert checked('["ping", "t"]') == ("ping", "t")
    assert checked('["focus"]') == ("focus", None) and checked('["blur"]') == ("blur", None)
