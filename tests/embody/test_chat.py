"""The chat client against a real loopback HTTP server: request shape, API key, failures named."""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest

from embody.chat import API_KEY_ENV, ChatClient, ChatError, LoopbackChatServer

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with LoopbackChatServer() as s:
        yield s


def test_request_shape(server):
    server.say("hi there")
    client = ChatClient(server.url + "/", "tiny-model", api_key="sk-test", timeout_s=5)
    assert client.chat(MESSAGES) == "hi there"
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["headers"]["Accept"] == "application/json"
    assert req["body"] == {"model": "tiny-model", "messages": MESSAGES, "temperature": 0}
    assert "sk-test" not in repr(client)


def test_api_key_from_environment(server, monkeypatch):
    server.say("a")
    server.say("b")
    assert ChatClient(server.url, "m").chat(MESSAGES) == "a"
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert ChatClient(server.url, "m").chat(MESSAGES) == "b"
    assert "Authorization" not in server.requests[0]["headers"]
    assert server.requests[1]["headers"]["Authorization"] == "Bearer from-env"


def test_http_error_status(server):
    server.fail(500, b'{"error": "model overloaded, try later"}')
    server.fail(404)
    client = ChatClient(server.url, "m")
    with pytest.raises(ChatError, match=r"answered HTTP 500 .*model overloaded"):
        client.chat(MESSAGES)
    with pytest.raises(ChatError, match=r"answered HTTP 404 .*\(empty body\)"):
        client.chat(MESSAGES)


@pytest.mark.parametrize(
    "body, match",
    [
        (b"<html>not json", "malformed JSON: '<html>not json'"),
        (b'{"choices": []}', r"without choices\[0\].message.content"),
        (b'{"object": "error"}', r"without choices\[0\].message.content"),
        (b'{"choices": [{"message": {"content": null}}]}', r"without choices\[0\].message.content"),
    ],
)
def test_malformed_reply(server, body, match):
    server.fail(200, body)
    with pytest.raises(ChatError, match=match):
        ChatClient(server.url, "m").chat(MESSAGES)


def test_timeout_is_reported_within_the_timeout(server):
    server.say("too late", delay_s=30)
    start = time.perf_counter()
    with pytest.raises(ChatError, match=rf"{server.url}/chat/completions did not answer within timeout_s=0.3 s"):
        ChatClient(server.url, "m", timeout_s=0.3).chat(MESSAGES)
    assert time.perf_counter() - start < 3.0


def test_connection_refused_names_the_url():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ChatError, match=rf"cannot reach LLM endpoint {url}/chat/completions: connection refused"):
        ChatClient(url, "m", timeout_s=2).chat(MESSAGES)


def test_one_retry_on_a_dropped_connection(server):
    server.drop()
    server.say("second try")
    assert ChatClient(server.url, "m").chat(MESSAGES) == "second try"
    server.drop()
    server.drop()
    with pytest.raises(ChatError, match="closed the connection twice"):
        ChatClient(server.url, "m").chat(MESSAGES)
    assert len(server.requests) == 4


def test_loopback_is_never_sent_through_a_proxy(server, monkeypatch):
    with socket.socket() as s:  # a proxy that does not exist: using it would be refused
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(var, dead)
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    server.say("direct")
    assert ChatClient(server.url, "m", timeout_s=5).chat(MESSAGES) == "direct"


def test_server_without_a_scripted_reply():
    with LoopbackChatServer() as strict, pytest.raises(ChatError, match="HTTP 500 .*no scripted reply left"):
        ChatClient(strict.url, "m").chat(MESSAGES)
    with LoopbackChatServer(default="(and)") as lenient:
        assert ChatClient(lenient.url, "m").chat(MESSAGES) == "(and)"
        assert ChatClient(lenient.url, "m").chat(MESSAGES) == "(and)"
        assert len(lenient.requests) == 2


def test_server_records_a_body_that_is_not_json_and_closes():
    with LoopbackChatServer(default="ok") as server:
        request = urllib.request.Request(server.url + "/chat/completions", data=b"not json", method="POST")
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5) as r:
            assert r.status == 200
        assert server.requests[0]["body"] == "not json"
    with pytest.raises(ChatError, match="connection refused"):  # closed: the port no longer answers
        ChatClient(server.url, "m", timeout_s=2).chat(MESSAGES)


def test_a_computed_reply_and_a_responder_that_fails_as_a_server_would():
    with LoopbackChatServer(respond=lambda body: body["messages"][-1]["content"].upper(), record=False) as server:
        assert ChatClient(server.url, "m").chat(MESSAGES) == MESSAGES[-1]["content"].upper()
        assert server.requests == []  # record=False keeps none
    with LoopbackChatServer(respond=lambda body: 1 / 0) as server:
        with pytest.raises(ChatError, match="HTTP 500"):
            ChatClient(server.url, "m").chat(MESSAGES)
