"""The askpass helper answers only the exact prompts OpenSSH asks this login's password with: a prompt that
merely contains "USER@HOST" (a jump host's own wording, a second factor, a banner) gets no answer and a
non-zero exit. The helper is the real script ssh would run; the real ssh reaching a real sshd with it is
tests/contract/test_stock_ssh.py's password test."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from workbench.protocols.openssh_sftp import askpass_env, askpass_prompts
from workbench.shared.credentials import Credentials
from workbench.shared.target import Target

USER, HOST = "alice", "127.0.0.1"


def _target(password: str, user: str = USER) -> Target:
    return Target(HOST, Credentials(user, password), ports={"ssh": 22}, remote_root="x", stock=True)


def _ask(env: dict[str, str], prompt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([env["SSH_ASKPASS"], prompt], env=env, capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize("prompt", [f"{USER}@{HOST}'s password: ", f"({USER}@{HOST}) Password: "])
def test_the_exact_prompts_are_answered(prompt: str) -> None:
    secret = f"wb-pw-{secrets.token_hex(8)}"
    with askpass_env(_target(secret)) as env:
        done = _ask(env, prompt)
    assert done.returncode == 0 and done.stdout == secret + "\n"


@pytest.mark.parametrize(
    "prompt",
    [
        f"root@jump.example's password for {USER}@{HOST}'s password: ",  # holds the exact prompt inside
        f"(root@jump) {USER}@{HOST}'s password: ",
        f"{USER}@{HOST}'s password: \n",
        f"{USER}@{HOST}'s password:",  # not ssh's exact wording (no trailing space)
        f"x{USER}@{HOST}'s password: ",
        f"({USER}@{HOST}) Verification code: ",  # a second factor is not the password
        f"({USER}@{HOST}) Password: extra",
        "*",
        "",
        f"{USER}@{HOST}",
    ],
)
def test_anything_else_gets_nothing(prompt: str) -> None:
    secret = f"wb-pw-{secrets.token_hex(8)}"
    with askpass_env(_target(secret)) as env:
        done = _ask(env, prompt)
    assert done.returncode != 0 and done.stdout == "" and secret not in done.stderr


def test_glob_characters_in_the_login_match_only_themselves() -> None:
    # a user name with a shell pattern in it must not turn the prompt check into a pattern
    secret = f"wb-pw-{secrets.token_hex(8)}"
    with askpass_env(_target(secret, user="a*")) as env:
        assert _ask(env, f"a*@{HOST}'s password: ").stdout == secret + "\n"
        assert _ask(env, f"abc@{HOST}'s password: ").returncode != 0


def test_older_releases_cut_the_names_short() -> None:
    user = "u" * 40
    prompts = askpass_prompts(user, HOST)
    assert f"{'u' * 30}@{HOST}'s password: " in prompts and f"{user}@{HOST}'s password: " in prompts
    assert askpass_prompts(USER, HOST) == (f"{USER}@{HOST}'s password: ", f"({USER}@{HOST}) Password: ")
