"""Each promise of flagos_doctor/redact.py's docstrings, one test each, through its public
functions (is_secret, mask_url_passwords, secret_values, remember, scrub, scrub_environ,
ScrubbingStream). scripts/mutation runs these first against mutants of redact.py."""

from __future__ import annotations

import io
import json

import pytest

from flagos_doctor import redact


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "MY_SECRET", "DB_PASSWORD", "DB_PASSWD",
                                  "GCP_CREDENTIALS", "DB_PASS", "SMTP_PWD", "GITHUB_PAT", "SSH_PRIVATE",
                                  "NPM_AUTH", "AUTH_HEADER", "GH_AUTH_X", "auth"])
def test_names_that_say_secret(name):
    assert redact.is_secret(name)


@pytest.mark.parametrize("name", ["PATH", "GIT_AUTHOR_NAME", "AUTHORS", "GIT_AUTHORS_FILE", "PASSTHROUGH",
                                  "MY_PASS_THROUGH", "PATTERN", "DB_PWD_FILE_X_Y" + "Z", "PRIVATE_DIR", "HOME"])
def test_names_that_do_not(name):
    # The shapes hold only at the end of a name (_PASS, _PWD, _PAT, _PRIVATE); AUTHOR(S) is no AUTH.
    assert not redact.is_secret(name)


def test_secret_name_wants_an_environment_variable_shape():
    assert redact.secret_name("HF_TOKEN") and redact.secret_name("$GEMS_PASSWORD")
    assert not redact.secret_name("the token") and not redact.secret_name(None) and not redact.secret_name(3)
    assert not redact.secret_name("hf_token")  # lower case: a word in a record, not a variable


@pytest.mark.parametrize("text, hidden, kept", [
    ("git clone https://bot:hunter22@git.example/x.git", "hunter22", "https://bot:***@git.example/x.git"),
    ("https:/bot:hunter22@git.example/x", "hunter22", "https:/bot:***@git.example/x"),  # after normpath
    ("mysql://u:pa/ss/wd@db/x", "pa/ss/wd", "mysql://u:***@db/x"),  # the password holds a /
    ("a https://u:p1@h/ then https://v:p2word@k/", "p2word", "https://v:***@k/"),
])
def test_a_password_inside_a_url(text, hidden, kept):
    clean = redact.mask_url_passwords(text)
    assert hidden not in clean and kept in clean, clean


@pytest.mark.parametrize("text", [
    "see /usr/lib:/opt/lib a@b",                       # no scheme before :/
    "https://user@example.com/x",                      # a user, no password
    "https://example.com/a:b@c",                       # the colon is after a / : a path, not userinfo
    "https://h/ x:y z@w",                              # a space before the @: not one URL
    "1://u:pw@h",                                      # a scheme starts with a letter
])
def test_what_is_not_a_url_password(text):
    assert redact.mask_url_passwords(text) == text


@pytest.mark.parametrize("text, secret", [
    ("host=db user=gems password=s3cretpw dbname=gems", "s3cretpw"),
    ("host=db passwd = s3cretpw", "s3cretpw"),
    ("host=db PWD=s3cretpw;x=1", "s3cretpw"),
    ("host=db user=gems password='s3cr3t pw' dbname=gems", "s3cr3t pw"),  # libpq's quoted value
])
def test_a_password_in_a_connection_string(text, secret):
    clean = redact.mask_url_passwords(text)
    assert secret not in clean and "***" in clean, clean
    assert "dbname=gems" in clean or "dbname" not in text
    # and what a child's environment holds there is learnt as a secret value, quotes off
    assert redact.secret_values({"FLAGGEMS_DB_URL": text}) == [secret]


def test_the_quoted_password_is_hidden_whole_everywhere():
    dsn = "host=db password='s3cr3t pw' dbname=x"
    document = {"conf": dsn, "log": ["connecting with s3cr3t pw failed"]}
    text = json.dumps(redact.scrub_environ(document, {"FLAGGEMS_DB_URL": dsn}))
    assert "s3cr3t" not in text and " pw'" not in text, text


def test_bearer_and_authorization_credentials():
    clean = redact.mask_url_passwords("curl -H 'Authorization: Bearer abcdefgh12345' x")
    assert "abcdefgh12345" not in clean and "Authorization: " in clean
    assert redact.mask_url_passwords("log: bearer Zx9_Zx9_Zx9") == "log: bearer <redacted>"
    assert redact.mask_url_passwords("Authorization: Basic dXNlcjpwdw==") == "Authorization: Basic <redacted>"
    assert redact.mask_url_passwords("Proxy-Authorization: token ghp_abc") == "Proxy-Authorization: token <redacted>"
    assert redact.mask_url_passwords("authorization=xyz123") == "authorization=<redacted>"
    # "basic" and "token" alone are ordinary words; a short word after bearer is no credential
    plain = "3 basic profiles; token counts; bearer of news"
    assert redact.mask_url_passwords(plain) == plain


def test_secret_named_assignments_and_idempotence():
    text = "MY_API_TOKEN=tok-123456 PATH=/usr/bin DB_PASS = abc"
    clean = redact.mask_url_passwords(text)
    assert clean == "MY_API_TOKEN=<redacted> PATH=/usr/bin DB_PASS = <redacted>"
    assert redact.mask_url_passwords(clean) == clean  # scrubbing twice changes nothing


def test_every_occurrence_of_a_secret_value_is_replaced_longest_first():
    environ = {"A_TOKEN": "abcd", "B_TOKEN": "abcdefgh", "SHORT_KEY": "xy", "PLAIN": "abcdzzzz"}
    assert redact.secret_values(environ) == ["abcdefgh", "abcd"]  # "xy" is under MIN_SECRET; PLAIN says nothing
    clean = redact.scrub({"a": "x abcdefgh y", "b": ["abcd!"], "n": 3, "t": True},
                         redact.secret_values(environ))
    assert clean == {"a": "x <redacted> y", "b": ["<redacted>!"], "n": 3, "t": True}


def test_a_record_about_a_secret_variable_loses_its_values_keeping_its_shape():
    record = {"probe": "$GEMS_API_KEY", "kind": "write", "seq": 7,
              "value": {"repr": "'set-by-the-stack'", "defined_at": None}, "final": "zz", "previous": None}
    clean = redact.scrub(record, [])
    assert clean["value"] == {"repr": "<redacted>", "defined_at": None}  # repr hidden, the record's shape kept
    assert clean["final"] == "<redacted>" and clean["previous"] is None
    assert (clean["kind"], clean["seq"], clean["probe"]) == ("write", 7, "$GEMS_API_KEY")
    by_name = redact.scrub({"name": "HF_TOKEN", "old": "o", "new": "n", "where": "w"}, [])
    assert by_name == {"name": "HF_TOKEN", "old": "<redacted>", "new": "<redacted>", "where": "w"}
    # an ordinary variable's record keeps its values
    assert redact.scrub({"probe": "$GEMS_VENDOR", "value": {"repr": "'x'"}}, []) == {
        "probe": "$GEMS_VENDOR", "value": {"repr": "'x'"}}


def test_a_secret_named_key_loses_its_value_but_not_a_flag_or_none():
    clean = redact.scrub({"HF_TOKEN": "anything", "DB_PASS": None, "GH_TOKEN": True, "GEMS_VENDOR": "nv"}, [])
    assert clean == {"HF_TOKEN": "<redacted>", "DB_PASS": None, "GH_TOKEN": True, "GEMS_VENDOR": "nv"}


def test_a_secret_as_a_key_is_hidden_too():
    clean = redact.scrub({"case-s3cretvalue": 1, "plain": 2}, ["s3cretvalue"])
    assert clean == {"case-<redacted>": 1, "plain": 2}


def test_learnt_values_are_hidden_from_then_on_in_every_sink():
    redact.remember(["child-only-s3cret", "ab", 12345678])  # too short and not text: ignored
    assert "child-only-s3cret" in redact.secret_values({}, learned=True)
    assert "ab" not in redact.secret_values({}, learned=True)
    assert "child-only-s3cret" not in redact.secret_values({})  # only with learned
    assert redact.scrub_environ("saw child-only-s3cret") == "saw <redacted>"
    # with an environment given, what it holds is what is hidden
    assert redact.scrub_environ("saw child-only-s3cret", {}) == "saw child-only-s3cret"
    assert redact.scrub_environ("k=9876543x", {"X_KEY": "9876543x"}) == "k=<redacted>"


def test_the_scrubbing_stream_hides_what_is_written_and_is_the_stream_otherwise():
    redact.remember(["stream-s3cret"])
    inner = io.StringIO()
    stream = redact.ScrubbingStream(inner)
    stream.write("a stream-s3cret b\n")
    stream.writelines(["MY_TOKEN=abc123\n", "plain\n"])
    assert inner.getvalue() == "a <redacted> b\nMY_TOKEN=<redacted>\nplain\n"
    assert stream.getvalue() == inner.getvalue()  # everything else is the wrapped stream's
    raw = io.BytesIO()
    assert redact.ScrubbingStream(raw).write(b"stream-s3cret") == 13 and raw.getvalue() == b"stream-s3cret"


def test_a_dsn_password_without_pw_in_it_is_found_by_its_key():
    # the cheap scan looks for "pw" or "passw": each alone must be enough
    assert redact.mask_url_passwords("host=db password=hunter22") == "host=db password=***"
    assert redact.mask_url_passwords("host=db pwd=hunter22") == "host=db pwd=***"


def test_a_scheme_is_read_back_at_most_32_characters():
    # the scheme found is the last 32 characters before ://: here all letters, so a URL,
    # though a digit starts the word 33 back (a longer read would see "1..." and no scheme)
    text = "1" + "a" * 32 + "://u:hunter22@h/x"
    assert redact.mask_url_passwords(text) == "1" + "a" * 32 + "://u:***@h/x"


def test_what_is_neither_text_nor_a_container_is_returned_as_it_is():
    assert redact.scrub(5, ["5"]) == 5 and redact.scrub(None, []) is None and redact.scrub(2.5, []) == 2.5


@pytest.mark.parametrize("text, masked", [
    ("1 https://u:hunter22@h", "1 https://u:***@h"),                # the scheme stops at the space
    ("redis://:hunter22@cache:6379", "redis://:***@cache:6379"),  # no user, a password
    ("https://u:hunter22@", "https://u:***@"),                    # the @ ends the text
    ("s://u:hunter22@h", "s://u:***@h"),                          # a one-letter scheme that starts the text
    ("see s3://u:hunter22@bucket", "see s3://u:***@bucket"),      # a digit inside the scheme
])
def test_url_passwords_at_the_edges(text, masked):
    assert redact.mask_url_passwords(text) == masked


@pytest.mark.parametrize("text", [
    "ssh://git@host",                        # a user and no colon: nothing to hide
    "https://a b:c@d",                       # a space inside: not one URL's userinfo
    "mail a@b.c about https://host:8080/x",  # an @ elsewhere, a port's colon: no password
])
def test_what_is_no_url_password_either(text):
    assert redact.mask_url_passwords(text) == text


def test_a_url_password_in_the_environment_is_learnt_as_a_secret_value():
    assert redact.secret_values({"DB_URL": "mysql://u:hunter22@h/x", "PLAIN": "no url here"}) == ["hunter22"]


def test_keys_that_are_not_text_are_kept():
    assert redact.scrub({1: "a", 2: ["abcdefg"]}, ["abcdefg"]) == {1: "a", 2: ["<redacted>"]}


def test_secret_arguments_are_the_values_of_secret_named_options():
    # secret_arguments: --api-key VALUE, --token=VALUE, -password VALUE (the option's name says
    # secret, as a variable's would); values shorter than MIN_SECRET are no secret.
    argv = ["python", "train.py", "--api-key", "k3y-abcd", "--model", "gpt2", "--token=tok-1234",
            "-password", "pw-4567", "--auth-token", "abc", "--token=", "--passthrough", "value-1",
            "--lr=0.125", "-", "7", 7, "--secret", 42, "--api-token"]
    assert redact.secret_arguments(argv) == ["k3y-abcd", "tok-1234", "pw-4567"]
    assert redact.secret_arguments(["--api-key"]) == [] and redact.secret_arguments([]) == []
    assert redact.secret_arguments(["--api-key", "k3y-abcd"]) == ["k3y-abcd"]  # the value last
    # Only an option's name counts: a positional word that says secret names no value.
    assert redact.secret_arguments(["login", "api_token", "visible-word"]) == []
    assert len("abc") < redact.MIN_SECRET <= len("gpt2")
