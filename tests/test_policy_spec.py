"""Policy spec strings → backends, their errors, and ``gymflow policy serve`` as a real process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app as cli
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.policy.openai_backend import OpenAIChatPolicy
from gymflow.policy.spec import PolicySpec, api_key, load_policy, parse_spec
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus

ENV = CounterEnvironment()


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("transformers:runs/a/policy", PolicySpec("transformers", "runs/a/policy")),
        ("runs/a/policy", PolicySpec("transformers", "runs/a/policy")),
        ("vllm:/models/q", PolicySpec("vllm", "/models/q")),
        (
            "openai:http://127.0.0.1:8000/v1?model=q&retries=1&token_ids=1",
            PolicySpec(
                "openai",
                "http://127.0.0.1:8000/v1",
                {"model": "q", "retries": "1", "token_ids": "1"},
            ),
        ),
        (
            "openai:https://api.example.com/v1/?model=gpt",
            PolicySpec("openai", "https://api.example.com/v1/", {"model": "gpt"}),
        ),  # fmt: skip
    ],
)
def test_specs_parse(spec, parsed):
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("sglang:/m", "unknown policy backend 'sglang'"),
        ("openai:http://127.0.0.1:8000/v1", "?model=NAME"),
        ("openai:127.0.0.1:8000/v1?model=m", "http(s) URL"),
        ("openai:http://h/v1?model=m&api_key=x", "GYMFLOW_POLICY_API_KEY"),
        ("openai:http://h/v1?model=m&retry=2", "unknown option(s) ['retry']"),
        ("vllm:", "names no model folder"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, says):
    with pytest.raises(GymflowError) as err:
        parse_spec(spec)
    assert err.value.kind == FailureKind.BAD_REQUEST and says in str(err.value)


def test_openai_spec_builds_the_client_with_the_key_from_the_environment(monkeypatch):
    monkeypatch.delenv("GYMFLOW_POLICY_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai-var")
    spec = "openai:https://h:1/v1?model=q&timeout_s=2.5&retries=0&concurrency=4"
    policy = load_policy(spec + "&body.tool_choice=none&body.skip_special_tokens=false")
    assert isinstance(policy, OpenAIChatPolicy)
    assert (policy.base_url, policy.model, policy.timeout_s) == ("https://h:1/v1", "q", 2.5)
    assert (policy.retries, policy.max_concurrency, policy.token_ids) == (0, 4, False)
    assert policy._headers == {"Authorization": "Bearer from-openai-var"}
    assert policy.extra_body == {"tool_choice": "none", "skip_special_tokens": False}
    monkeypatch.setenv("GYMFLOW_POLICY_API_KEY", "ours-first")
    assert api_key() == "ours-first"
    monkeypatch.setenv("JUDGE_KEY", "judge")
    assert api_key("JUDGE_KEY") == "judge"
    with pytest.raises(GymflowError, match="NOT_SET_ANYWHERE"):
        load_policy("openai:http://h:1/v1?model=q&api_key_env=NOT_SET_ANYWHERE")
    with pytest.raises(GymflowError, match="not a number"):
        load_policy("openai:http://h:1/v1?model=q&retries=many")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, corpus_size=300
    )
    return ensure_tiny_model(
        tmp_path_factory.mktemp("cache"),
        "counter",
        lambda: tokenizer_corpus(ENV, cfg.corpus_size, 5),
        cfg,
    )


def test_the_key_goes_only_over_https_or_to_loopback_unless_told(monkeypatch, caplog):
    monkeypatch.setenv("GYMFLOW_POLICY_API_KEY", "sekret")
    sent = {"Authorization": "Bearer sekret"}
    for url in ("https://api.example/v1", "http://127.0.0.1:8000/v1", "http://localhost:1/v1"):
        policy = load_policy(f"openai:{url}?model=m")
        assert policy._headers == sent and not policy.key_withheld, url
    with caplog.at_level("WARNING", logger="gymflow.policy.openai_backend"):
        plain = load_policy("openai:http://10.0.0.5:8000/v1?model=m")
    assert plain._headers == {} and plain.key_withheld
    assert "not sent to http://10.0.0.5:8000/v1" in caplog.text and "insecure_key=1" in caplog.text
    told = load_policy("openai:http://10.0.0.5:8000/v1?model=m&insecure_key=1")
    assert told._headers == sent and not told.key_withheld


def test_transformers_specs_load_a_folder(tiny_model, tmp_path):
    from gymflow.policy.transformers_backend import TransformersPolicy

    for spec in (str(tiny_model), f"transformers:{tiny_model}"):
        assert isinstance(load_policy(spec), TransformersPolicy)
    with pytest.raises(GymflowError, match="no model folder"):
        load_policy(f"transformers:{tmp_path / 'missing'}")
    # catalog models and .gguf files are checkpoints as the README shows them, not folders:
    # they reach the catalog and the GGUF reader (which refuse these two in their own words)
    with pytest.raises(GymflowError, match="no catalog model 'nope'"):
        load_policy("transformers:catalog:nope")
    with pytest.raises(GymflowError, match="GGUF"):
        load_policy(f"transformers:{tmp_path / 'missing.gguf'}")


def test_policy_serve_refuses_what_it_cannot_serve(tmp_path):
    runner = CliRunner()
    for model, says in (
        ("openai:http://h/v1?model=m", "not another server"),
        (str(tmp_path / "missing"), "no model folder"),
    ):
        result = runner.invoke(cli, ["policy", "serve", "--model", model])
        assert result.exit_code == 2 and says in result.output, result.output


def test_policy_serve_refuses_a_non_loopback_bind_without_a_key(tmp_path):
    runner = CliRunner()
    model = str(tmp_path / "any")  # refused before any model is loaded
    result = runner.invoke(cli, ["policy", "serve", "--policy", model, "--host", "0.0.0.0"])
    assert result.exit_code == 2, result.output
    assert "refusing to serve any on 0.0.0.0 without a bearer token" in result.output
    assert "--api-key-env VAR" in result.output and "--insecure" in result.output
    told = runner.invoke(
        cli, ["policy", "serve", "--policy", model, "--host", "0.0.0.0", "--insecure"]
    )
    assert "without a bearer token (--insecure)" in told.output  # warned, then on to loading
    assert told.exit_code == 2 and "no model folder" in told.output


def test_policy_serve_answers_chat_completions(tiny_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "SERVE_KEY": "k"}
    gymflow = str(Path(sys.executable).with_name("gymflow"))  # the installed console script
    cmd = [gymflow, "policy", "serve", "--model", str(tiny_model)]
    cmd += ["--port", str(port), "--name", "tiny", "--api-key-env", "SERVE_KEY"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        auth = {"Authorization": "Bearer k"}
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                models = http.get("/v1/models")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.2)
        assert models.json()["data"][0]["id"] == "tiny"
        body = {
            "messages": [{"role": "user", "content": "add 1 then add 2 then get the count"}],
            "tools": ENV.tool_schemas,
            "max_tokens": 8,
            "logprobs": True,
            "return_token_ids": True,
        }
        answer = http.post("/v1/chat/completions", json=body).json()
        choice = answer["choices"][0]
        assert choice["finish_reason"] in ("stop", "length", "tool_calls")
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) <= 8
        assert answer["usage"]["prompt_tokens"] == len(answer["prompt_token_ids"]) > 0
    finally:
        proc.terminate()
        proc.wait(10)
