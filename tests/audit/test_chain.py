"""A chained (and signed) audit log: written by a real Guard from its policy's audit section,
checked offline by ``callwarden audit verify``, which names the first line that was edited,
removed, reordered, truncated, forged or re-signed."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _audit_support import CALLS

from callwarden import Guard, PolicyError, ToolDenied
from callwarden.audit import (
    Auditor,
    ChainedJsonlSink,
    load_signing_key,
    log_files,
    verify_logs,
)
from callwarden.audit._chain import (
    GENESIS,
    chain_hash,
    chain_suffix,
    generate_signing_key,
    seal_message,
)
from callwarden.cli import main
from callwarden.exceptions import MissingDependency

HERE = Path(__file__).parent
POLICY = """\
version: 1
name: chained
default: allow
audit:
  - {{jsonl: {log}, {options}}}
tools:
  bash: {{kind: shell, command: command}}
rules:
  - id: no-prod
    match: {{tool: deploy}}
    args: {{env: prod}}
    effect: deny
"""


def write_policy(tmp_path: Path, options: str, log: Path | None = None) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(log=log or tmp_path / "audit.jsonl", options=options))
    return policy


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "audit.key"
    generate_signing_key(path)
    return path


def public(key: Path) -> str:
    return (key.parent / f"{key.name}.pub").read_text().strip()


def write_log(tmp_path: Path, options: str, calls: int = 1) -> Path:
    """Every call of CALLS (``calls`` times over) run through a Guard built from the policy
    file (a decision event each, and an outcome for those allowed); then the guard is closed."""
    guard = Guard.from_file(write_policy(tmp_path, options))
    for _ in range(calls):
        for tool, args, session in CALLS:
            with contextlib.suppress(ToolDenied):
                guard.run(tool, args, lambda **kw: "ok", session=session)
    guard.close()
    return tmp_path / "audit.jsonl"


def verify(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["audit", "verify", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def lines_of(log: Path) -> list[bytes]:
    with open(log, "rb") as f:
        return f.readlines()  # split at newlines only, as the sink writes them


def first(lines: list[bytes], text: bytes) -> int:
    """The index of the first line holding ``text``."""
    return next(i for i, line in enumerate(lines) if text in line)


def rechain(log: Path, edit: Callable[[int, dict[str, Any]], dict[str, Any] | None],
            signer: Any = None) -> None:
    """What a forger without the original key can do: change events (``edit(i, event)``
    returns the new event, or None to drop the line), recompute every hash of every stream,
    and sign the seals with ``signer`` (another key), or leave them unsigned."""
    heads: dict[str, tuple[int, str]] = {}
    out = []
    for i, raw in enumerate(lines_of(log)):
        event = json.loads(raw)
        chain = event.pop("chain")
        event = edit(i, event)
        if event is None:
            continue
        stream = chain["stream"]
        seq, prev = heads.get(stream, (0, GENESIS))
        seq += 1
        if event["type"] == "audit_seal":
            event["key"] = signer.public if signer else None
            event["sig"] = signer.sign(seal_message(stream, seq, prev, event["reason"],
                                                    event["time"], signer.public)) \
                if signer else None
        body = json.dumps(event, separators=(",", ":")).encode()
        digest = chain_hash(stream, seq, prev, body)
        out.append(body[:-1] + chain_suffix(stream, seq, prev, digest).encode() + b"\n")
        heads[stream] = (seq, digest)
    log.write_bytes(b"".join(out))


# -- an intact log -------------------------------------------------------------------------


def test_a_signed_log_written_by_a_guard_verifies(tmp_path: Path, key: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    records = [json.loads(line) for line in lines_of(log)]
    assert all(r["chain"]["stream"] == records[0]["chain"]["stream"] for r in records)
    assert [r["chain"]["seq"] for r in records] == list(range(1, len(records) + 1))
    assert records[-1]["type"] == "audit_seal" and records[-1]["reason"] == "close"
    assert records[-1]["key"] == public(key)
    code, out = verify(capsys, log, "--public-key", f"{key}.pub")
    assert code == 0, out
    assert out.startswith("OK: 1 file(s)") and "1 signed by" in out and "(trusted)" in out
    report = verify_logs([log], public_keys=[public(key)])
    assert (report.events, report.seals, report.streams, report.closed) == (
        len(records) - 1, 1, 1, 1)


def test_a_chained_log_without_a_key_verifies(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    code, out = verify(capsys, log)
    assert code == 0, out
    assert "unsigned" in out
    assert json.loads(lines_of(log)[-1])["sig"] is None


def test_threads_of_one_guard_keep_one_ordered_stream(tmp_path: Path) -> None:
    sink = ChainedJsonlSink(tmp_path / "audit.jsonl")
    guard = Guard(audit=Auditor([sink], deadline=60.0))  # generous: the machine may be busy

    def decide(n: int) -> None:
        for i in range(200):
            guard.check("fetch", {"url": f"https://example.com/{n}/{i}"})

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: races show
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    guard.close()
    report = verify_logs([tmp_path / "audit.jsonl"])
    assert report.ok, report.summary()
    assert (report.events, report.streams, report.closed) == (1200, 1, 1)


# -- what verify names ---------------------------------------------------------------------


def test_one_edited_byte_is_named_by_its_line(tmp_path: Path, key: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    lines = lines_of(log)
    i = first(lines, b'"effect":"deny"')
    lines[i] = lines[i].replace(b'"effect":"deny"', b'"effect":"deaf"')
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 1
    assert f"{log}:{i + 1}: edited: its content does not match its hash" in out
    code, out = verify(capsys, log, "--json")
    problem = json.loads(out)["problem"]
    assert (code, problem["line"], problem["kind"]) == (1, i + 1, "edited")


def test_an_edit_with_its_hash_recomputed_is_named_by_the_next_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    i = first(lines, b'"effect":"deny"')
    event = json.loads(lines[i])
    chain = event.pop("chain")
    event["effect"] = "allow"
    body = json.dumps(event, separators=(",", ":")).encode()
    digest = chain_hash(chain["stream"], chain["seq"], chain["prev"], body)
    lines[i] = body[:-1] + chain_suffix(chain["stream"], chain["seq"], chain["prev"],
                                        digest).encode() + b"\n"
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log)
    assert code == 1
    assert f"{log}:{i + 2}: edited: its prev does not match the hash of the line before it" \
        in out
    assert f"(audit.jsonl:{i + 1})" in out


def test_a_deleted_line_is_named_where_the_gap_is(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    del lines[2]
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log)
    assert code == 1
    assert f"{log}:3: removed:" in out and "jumps from seq 2" in out and "to 4" in out


def test_two_swapped_lines_are_reordered(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    lines[4], lines[5] = lines[5], lines[4]
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log)
    assert code == 1
    assert f"{log}:5: reordered: seq 6 of" in out and "before seq 5 (audit.jsonl:6)" in out


def test_a_whole_earlier_run_removed_is_named_by_the_run_after_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    first_run = len(lines_of(log))
    write_log(tmp_path, "chain: true")  # the next run: a stream of its own, tied to the first
    lines = lines_of(log)
    earlier, later = json.loads(lines[0])["chain"], json.loads(lines[first_run])["chain"]
    assert later["after"] == f"{earlier['stream']}:{first_run}" != earlier.get("after")
    code, out = verify(capsys, log)
    assert code == 0 and "2 stream(s), 2 closed" in out, out
    log.write_bytes(b"".join(lines[first_run:]))
    code, out = verify(capsys, log)
    assert code == 1
    assert (f"{log}:1: removed: stream {later['stream']} was started after line {first_run} "
            f"of stream {earlier['stream']}, which is not in the files given") in out


def test_a_repeated_line_is_duplicated(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    lines.insert(3, lines[2])
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log)
    assert (code, f"{log}:4: duplicated: a copy of audit.jsonl:3" in out) == (1, True), out


def test_a_file_cut_mid_line_is_truncated(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    count = len(lines_of(log))
    with open(log, "r+b") as f:
        f.truncate(log.stat().st_size - 40)
    code, out = verify(capsys, log)
    assert code == 1
    assert f"{log}:{count}: truncated: the file ends in the middle of this line" in out


def test_a_file_cut_at_a_line_end_is_truncated(tmp_path: Path, key: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    lines = lines_of(log)
    log.write_bytes(b"".join(lines[:-3]))
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 1
    assert f"{log}:{len(lines) - 3}: truncated: stream" in out and "has no seal at all" in out


def test_a_dropped_last_seal_is_truncated(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    assert json.loads(lines[-1])["type"] == "audit_seal"
    log.write_bytes(b"".join(lines[:-1]))
    code, out = verify(capsys, log)
    assert code == 1
    assert f"{log}:{len(lines) - 1}: truncated:" in out and "without a close seal" in out


def test_a_log_re_signed_with_another_key_is_refused(tmp_path: Path, key: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    count = len(lines_of(log))
    other = tmp_path / "other.key"
    generate_signing_key(other)

    def allow_prod(i: int, event: dict[str, Any]) -> dict[str, Any]:
        return {**event, "effect": "allow"} if event.get("effect") == "deny" else event

    rechain(log, allow_prod, signer=load_signing_key(other))
    code, out = verify(capsys, log, "--public-key", f"{key}.pub")
    assert code == 1
    assert f"{log}:{count}: unknown-key: signed by {public(other)[:16]}" in out
    # Without a trusted key the forgery is self-consistent: verify says what it did not check.
    code, out = verify(capsys, log)
    assert code == 0 and "not checked against a trusted key" in out


def test_a_log_rewritten_without_signatures_is_refused_with_the_key(
        tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    rechain(log, lambda i, event: None if i == 2 else event)
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 1
    assert "unsigned: an unsigned seal: the log must be signed by the trusted key" in out


def test_a_seal_whose_signature_was_altered_is_a_bad_signature(
        tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    count = len(lines_of(log))

    def flip(i: int, event: dict[str, Any]) -> dict[str, Any]:
        if event["type"] == "audit_seal":
            event = {**event, "time": event["time"].replace("Z", "1Z")}
        return event

    signer = load_signing_key(key)
    rechain(log, flip, signer=signer)  # signed by the right key, then the time changed:
    lines = lines_of(log)
    seal = json.loads(lines[-1])
    seal["time"] = seal["time"][:-2] + "Z"
    chain = seal.pop("chain")
    body = json.dumps(seal, separators=(",", ":")).encode()
    digest = chain_hash(chain["stream"], chain["seq"], chain["prev"], body)
    lines[-1] = body[:-1] + chain_suffix(chain["stream"], chain["seq"], chain["prev"],
                                         digest).encode() + b"\n"
    log.write_bytes(b"".join(lines))
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 1
    assert f"{log}:{count}: bad-signature: the seal's signature does not verify" in out


def test_forged_lines_appended_are_named(tmp_path: Path, key: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    original = log.read_bytes()
    lines = lines_of(log)
    count = len(lines)
    # A copy of a decision with its effect changed.
    denied = lines[first(lines, b'"effect":"deny"')]
    log.write_bytes(original + denied.replace(b'"effect":"deny"', b'"effect":"allow"'))
    assert verify(capsys, log)[1].count(f"{log}:{count + 1}: edited:") == 1
    # A plain event, without a chain.
    plain = json.loads(denied)
    del plain["chain"]
    log.write_bytes(original + json.dumps(plain).encode() + b"\n")
    assert f"{log}:{count + 1}: unchained:" in verify(capsys, log)[1]
    # The stream continued after its close seal, hashes right: no seal covers the new line.
    last = json.loads(lines[-1])["chain"]
    body = json.dumps({**plain, "decision_id": "forged"}, separators=(",", ":")).encode()
    digest = chain_hash(last["stream"], last["seq"] + 1, last["hash"], body)
    forged = body[:-1] + chain_suffix(last["stream"], last["seq"] + 1, last["hash"],
                                      digest).encode() + b"\n"
    log.write_bytes(original + forged)
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 1
    assert f"{log}:{count + 1}: appended: 1 line(s) of stream" in out
    # A whole new stream, chained right and never sealed.
    digest = chain_hash("f0f0", 1, GENESIS, body)
    log.write_bytes(original + body[:-1] + chain_suffix("f0f0", 1, GENESIS, digest).encode()
                    + b"\n")
    code, out = verify(capsys, log)
    assert code == 1 and f"{log}:{count + 1}: truncated: stream f0f0" in out


@pytest.mark.parametrize(("junk", "kind"), [
    (b"\x00\xff\xfe binary\n", "not-json"), (b"not json at all\n", "not-json"),
    (b'{"a":' * 100_000 + b"\n", "not-json"), (b"\n", "not-json"), (b'"a string"\n', "not-json"),
    (b'{"chain": {"stream": 1}}\n', "edited"), (b'{"chain":"x"}\n', "unchained"),
])
def test_junk_is_named_never_a_crash(tmp_path: Path, junk: bytes, kind: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, "chain: true")
    lines = lines_of(log)
    log.write_bytes(b"".join(lines[:2]) + junk + b"".join(lines[2:]))
    code, out = verify(capsys, log)
    assert code == 1 and f"{log}:3: {kind}: " in out


def test_verify_in_its_own_process_reports_binary_junk_without_a_traceback(
        tmp_path: Path) -> None:
    log = write_log(tmp_path, "chain: true")
    with open(log, "ab") as f:
        f.write(bytes(b for b in range(256) if b != 10) + b"\n")
    run = subprocess.run([sys.executable, "-m", "callwarden", "audit", "verify", str(log)],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr) == (1, "")
    assert run.stdout.startswith(f"FAIL: {log}:{len(lines_of(log))}: not-json:")


def test_an_unchained_log_and_an_empty_one_are_refused(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    log = write_log(plain, "fsync: false")
    code, out = verify(capsys, log)
    assert code == 1 and f"{log}:1: unchained:" in out
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert verify(capsys, empty)[0] == 2
    assert verify(capsys, tmp_path / "missing.jsonl")[0] == 2


# -- writers in several processes, rotation ------------------------------------------------


def test_two_processes_appending_to_one_file_verify(tmp_path: Path, key: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_policy(tmp_path, f"sign_key: {key}, rotate_bytes: 20KB")
    go = tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, str(HERE / "_chain_worker.py"), str(policy),
                                 str(go), "300"], cwd=HERE)
               for _ in range(2)]
    go.write_text("")
    assert [w.wait(timeout=300) for w in workers] == [0, 0]
    code, out = verify(capsys, tmp_path / "audit.jsonl", "--public-key", public(key))
    assert code == 0, out
    report = verify_logs(
        [*sorted(tmp_path.glob("audit.*Z.*.jsonl")), tmp_path / "audit.jsonl"],
        public_keys=[public(key)])
    assert (report.events, report.streams, report.closed) == (1200, 2, 2), report.summary()


def _child(guard: Guard) -> None:
    for i in range(50):
        guard.check("fetch", {"url": f"https://example.com/child/{i}"})
    guard.close()


def test_a_forked_child_writes_a_stream_of_its_own(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    guard = Guard(audit=Auditor([ChainedJsonlSink(log)]))
    guard.check("fetch", {"url": "https://example.com/parent/0"})
    child = multiprocessing.get_context("fork").Process(target=_child, args=(guard,))
    child.start()
    for i in range(50):
        guard.check("fetch", {"url": f"https://example.com/parent/{i + 1}"})
    child.join(timeout=120)
    assert child.exitcode == 0
    guard.close()
    report = verify_logs([log])
    assert report.ok, report.summary()
    assert (report.events, report.streams, report.closed) == (101, 2, 2)


def test_rotated_pieces_verify_together_and_not_apart(tmp_path: Path, key: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    log = write_log(tmp_path, f"sign_key: {key}, rotate_bytes: 4KB", calls=6)
    pieces = sorted(tmp_path.glob("audit.*Z.*.jsonl"))
    assert len(pieces) >= 3
    for piece in pieces:
        last = json.loads(lines_of(piece)[-1])
        assert (last["type"], last["reason"]) == ("audit_seal", "rotate")
    code, out = verify(capsys, log, "--public-key", public(key))
    assert code == 0, out
    assert f"OK: {len(pieces) + 1} file(s)" in out
    assert log_files([pieces[2], log, pieces[0]]) == [*pieces, log]
    report = verify_logs([log])  # the current file alone: its stream starts mid-way
    assert report.problem is not None and report.problem.kind == "removed"
    assert "in a rotated piece not given" in report.problem.message
    pieces[1].unlink()  # a piece removed
    code, out = verify(capsys, log)
    assert code == 1 and f"{pieces[2]}:1: removed:" in out


def test_an_open_stream_fails_unless_allowed(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "audit.jsonl"
    sink = ChainedJsonlSink(log)
    guard = Guard(audit=Auditor([sink]))
    guard.check("fetch", {"url": "https://example.com/"})
    code, out = verify(capsys, log)
    assert code == 1 and "truncated" in out and "--allow-open" in out
    code, out = verify(capsys, log, "--allow-open")
    assert code == 0 and "1 stream(s) still open, 1 line(s) after their last seal" in out
    guard.close()
    assert verify(capsys, log)[0] == 0


# -- readers keep working ------------------------------------------------------------------


def test_replay_explain_and_summary_read_a_chained_log(tmp_path: Path, key: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    decisions = [json.loads(line) for line in lines_of(log)
                 if json.loads(line)["type"] == "decision"]
    policy = tmp_path / "policy.yaml"
    assert main(["replay", "--policy", str(policy), "--json", str(log)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["decisions"] == len(decisions) == len(CALLS)
    assert report["changed"] == 0
    denied = next(d for d in decisions if d["effect"] == "deny")
    assert main(["explain", denied["decision_id"], str(log)]) == 0
    assert "no-prod" in capsys.readouterr().out
    assert main(["audit", "summary", "--json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out)["decisions"] == len(CALLS)


# -- the key -------------------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    path = tmp_path / "k" / "audit.key"
    assert main(["audit", "keygen", str(path)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == public(path) and len(printed) == 64
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_signing_key(path).public == printed
    assert main(["audit", "keygen", str(path)]) == 2
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "setup", "line", "expected"), [
    ("sign_key: keys/missing.key", None, 4,
     "the signing key {key_dir}/missing.key does not exist (create one: callwarden audit "
     "keygen {key_dir}/missing.key)"),
    ("sign_key: keys/audit.key", "chmod", 4,
     "the signing key {key_dir}/audit.key is accessible to others (mode 0644) (chmod 600"),
    ("sign_key: keys/audit.key", "garbage", 4,
     "is not an unencrypted Ed25519 private key in PEM (write one with: callwarden audit "
     "keygen"),
    ("sign_key: keys/audit.key, chain: false", None, 5, "a signed log is a chained log"),
    ("chain: yes please", None, 5, "chain: must be true or false"),
    ("sign_key: 42", None, 5, "needs the path of an Ed25519 private key file"),
])
def test_a_key_that_cannot_be_used_is_a_policy_error(tmp_path: Path, options: str,
                                                     setup: str | None, line: int,
                                                     expected: str) -> None:
    key = tmp_path / "keys" / "audit.key"
    generate_signing_key(key)
    if setup == "chmod":
        key.chmod(0o644)
    elif setup == "garbage":
        key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    policy = write_policy(tmp_path, options)
    with pytest.raises(PolicyError) as info:
        Guard.from_file(policy)
    assert expected.format(key_dir=key.parent) in str(info.value)
    assert f"policy.yaml:{line}: " in str(info.value)
    assert not (tmp_path / "audit.jsonl").exists()


def test_what_if_uses_of_a_signing_policy_need_no_key(tmp_path: Path, key: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    key.unlink()  # a reviewer's machine: the log and the policy, never the private key
    assert main(["replay", "--policy", str(tmp_path / "policy.yaml"), str(log)]) == 0
    assert main(["lint", str(tmp_path / "policy.yaml")]) == 0
    capsys.readouterr()
    assert verify(capsys, log, "--public-key", f"{key}.pub")[0] == 0
    with pytest.raises(PolicyError, match="does not exist"):
        Guard.from_file(tmp_path / "policy.yaml")


def test_signing_without_cryptography_says_what_to_install(
        tmp_path: Path, key: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric", None)
    with pytest.raises(MissingDependency, match=r"callwarden\[audit-signing\]"):
        load_signing_key(key)
    with pytest.raises(MissingDependency, match=r"callwarden\[audit-signing\]"):
        Guard.from_file(write_policy(tmp_path, f"sign_key: {key}"))
    assert not (tmp_path / "audit.jsonl").exists()


def test_a_public_key_file_or_hex_is_accepted_and_a_private_key_refused(
        tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path, f"sign_key: {key}")
    assert verify(capsys, log, "--public-key", public(key).upper())[0] == 0
    code, out = verify(capsys, log, "--public-key", key)
    assert code == 2 and "is a private key" in out


def test_chained_lines_and_seals_validate_against_the_event_schema(tmp_path: Path) -> None:
    """The shipped event schema knows the chain member and the seal lines (two writers, so
    the second stream's first line names the line it follows)."""
    import jsonschema

    from callwarden.audit import load_schema

    validator = jsonschema.Draft202012Validator(load_schema())
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\naudit: [{jsonl: audit.jsonl, chain: true}]\n"
                      "rules: [{id: no-prod, match: {tool: deploy}, args: {env: prod}}]\n")
    for _ in range(2):
        guard = Guard.from_file(policy)
        guard.check("deploy", {"env": "prod"})
        guard.close()
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["type"] for e in lines] == ["decision", "audit_seal"] * 2
    assert "after" in lines[2]["chain"]
    for event in lines:
        assert not list(validator.iter_errors(event)), event
    assert not validator.is_valid({**lines[1], "chain": {**lines[1]["chain"], "extra": 1}})
