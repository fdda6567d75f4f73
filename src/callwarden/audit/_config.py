"""Parsing of a policy file's ``audit:`` section into :class:`AuditSettings`.

Either a list of sinks, or a mapping with options::

    audit:
      - {jsonl: logs/audit.jsonl, rotate_bytes: 10MB, rotate_interval: 1d, fsync: true,
         inline: true}           # false: written from the auditor's thread (network disks)
      - {stdout: {}}
      - {jsonl: logs/chained.jsonl, chain: true}    # tamper-evident (audit._chain)
      - {jsonl: logs/signed.jsonl, sign_key: /etc/callwarden/audit.key}  # ... and signed

    audit:
      required: true            # fail closed when a sink fails, too
      delivery: written         # written (default) | queued | lossy
      deadline: 1s              # how long a call may wait for its event's write
      queue_size: 10000
      redact: {keys: [ssn], patterns: {ticket: "TCK-[0-9]{6}"}, callback: "mymod:scrub",
               detectors: [secret, pii], max_string: 4096, max_bytes: 65536}
      sinks:
        - {sqlite: audit.db}
        - {otel: {signal: logs}}
        - {callable: "mymod:ship"}

Each sink is a mapping with one sink key; its options go in the key's value (a mapping) or
beside it. Relative paths are relative to the policy file.

Parsing (:func:`parse_audit_config`) checks everything and opens nothing: it returns
:class:`AuditSettings`, from which :meth:`Auditor.from_settings` opens the sinks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden._units import parse_duration, parse_size
from callwarden.analysis.detectors import UnknownDetector
from callwarden.audit._chain import ChainedJsonlSink, SigningKeyError
from callwarden.audit._redact import Redactor
from callwarden.audit._sinks import CallableSink, JsonlSink, SQLiteSink, StdoutSink
from callwarden.engine.user import load_object
from callwarden.exceptions import ConfigError

__all__ = ["DELIVERIES", "AuditSettings", "SinkSpec", "build_sink", "parse_audit_config"]

Key = tuple[str | int, ...]

_SINK_KEYS = ("jsonl", "stdout", "sqlite", "otel", "callable")
_OPTIONS = {
    "jsonl": ("path", "rotate_bytes", "rotate_interval", "fsync", "inline", "chain", "sign_key"),
    "stdout": (),
    "sqlite": ("path", "table"),
    "otel": ("signal",),
    "callable": ("target",),
}
_MAIN = {"jsonl": "path", "sqlite": "path", "callable": "target"}
_TOP = ("sinks", "required", "delivery", "deadline", "queue_size", "redact")
DELIVERIES = ("written", "queued", "lossy")
"""What ``Auditor.decision()`` guarantees on return: the event is written (default), queued
(waiting for room, never dropped), or maybe dropped (``lossy``, counted and noted)."""
_REDACT = ("keys", "default_keys", "patterns", "callback", "detectors", "max_string",
           "max_bytes")


def _error(path: Key, message: str, hint: str | None = None) -> ConfigError:
    dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    error = ConfigError(message, key=dotted or None, hint=hint)
    error.path = path  # type: ignore[attr-defined]  # the loader maps it to a line
    return error




def _keys(raw: Mapping[str, Any], path: Key, allowed: tuple[str, ...], what: str) -> None:
    import difflib

    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"allowed: {', '.join(allowed) or 'no options'}"
            raise _error((*path, key), f"unknown key in {what}", hint)


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """One sink to open: its kind (``jsonl``, ``stdout``, ``sqlite``, ``otel``, ``callable``) and
    the keyword arguments of its constructor (for ``callable``: the loaded ``target``)."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """A validated ``audit:`` section: the sinks to open and how the auditor behaves."""

    sinks: tuple[SinkSpec, ...]
    redactor: Redactor | None = None
    required: bool = False
    deadline: float = 1.0
    queue_size: int = 10_000
    delivery: str = "written"


def parse_audit_config(config: Any, *, base_dir: Path) -> AuditSettings:
    """Checks the ``audit:`` section and returns its settings; opens nothing.

    Raises:
        ConfigError: with ``key`` (dotted) and ``path`` (a tuple under ``audit``).
    """
    prefix: Key
    if isinstance(config, list):
        config, prefix = {"sinks": config}, ()
    elif isinstance(config, Mapping):
        prefix = ("sinks",)
        _keys(config, (), _TOP, "the audit section")
    else:
        raise _error((), "must be a list of sinks or a mapping with 'sinks:'",
                     "e.g. audit: [{jsonl: logs/audit.jsonl}]")
    raw_sinks = config.get("sinks")
    if not isinstance(raw_sinks, list) or not raw_sinks:
        raise _error(prefix if "sinks" in config else (), "needs a non-empty list of sinks",
                     "e.g. sinks: [{jsonl: logs/audit.jsonl}]")
    sinks = [_sink(raw, (*prefix, i), base_dir) for i, raw in enumerate(raw_sinks)]

    required = config.get("required", False)
    if not isinstance(required, bool):
        raise _error(("required",), "must be true or false")
    delivery = config.get("delivery", "written")
    if delivery not in DELIVERIES:
        raise _error(("delivery",), f"must be one of {', '.join(DELIVERIES)}",
                     "written: every call's event is written before it runs (the default); "
                     "lossy: never wait, count and note what is dropped")
    if required and delivery != "written":
        raise _error(("delivery",), "a required audit is written before the call runs",
                     "drop 'delivery', or 'required: true'")
    deadline = 1.0
    if "deadline" in config:
        try:
            deadline = parse_duration(config["deadline"])
        except ValueError as e:
            raise _error(("deadline",), str(e)) from e
    queue_size = config.get("queue_size", 10_000)
    if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
        raise _error(("queue_size",), "must be a positive integer", "e.g. queue_size: 10000")
    redactor = _redactor(config.get("redact"), ("redact",), base_dir)
    return AuditSettings(tuple(sinks), redactor, required, deadline, queue_size, delivery)


def _sink(raw: Any, path: Key, base_dir: Path) -> SinkSpec:
    if not isinstance(raw, Mapping):
        raise _error(path, "a sink must be a mapping with one sink key",
                     f"one of: {', '.join(_SINK_KEYS)}; e.g. {{jsonl: logs/audit.jsonl}}")
    kinds = [k for k in raw if k in _SINK_KEYS]
    if len(kinds) != 1:
        others = [k for k in raw if k not in _SINK_KEYS]
        if not kinds and others:
            _keys({others[0]: None}, path, _SINK_KEYS, "a sink")
        raise _error(path, "a sink needs exactly one of " + ", ".join(_SINK_KEYS),
                     "write one sink per list item")
    kind = kinds[0]
    value = raw[kind]
    options: dict[str, Any] = {}
    if isinstance(value, Mapping):
        _keys(value, (*path, kind), _OPTIONS[kind], f"the {kind} sink")
        options.update(value)
    elif value is not None and value is not True:
        if kind not in _MAIN:
            raise _error((*path, kind), "takes a mapping of options", f"e.g. {{{kind}: {{}}}}")
        options[_MAIN[kind]] = value
    beside = {k: v for k, v in raw.items() if k != kind}
    _keys(beside, path, _OPTIONS[kind], f"the {kind} sink")
    options.update(beside)
    where = (*path, kind)
    try:
        return _sink_spec(kind, options, path, base_dir)
    except ConfigError:
        raise
    except ImportError as e:
        raise _error(where, str(e), "install the missing package or fix the name") from e
    except (TypeError, ValueError) as e:
        raise _error(where, str(e)) from e


def _path(options: Mapping[str, Any], path: Key, kind: str, base_dir: Path) -> Path:
    value = options.get("path")
    if not isinstance(value, str) or not value.strip():
        raise _error((*path, kind), "needs a file path", f"e.g. {{{kind}: logs/audit.{kind}}}")
    p = Path(value).expanduser()
    return p if p.is_absolute() else base_dir / p


def _sink_spec(kind: str, options: dict[str, Any], path: Key, base_dir: Path) -> SinkSpec:
    if kind == "jsonl":
        rotate_bytes = rotate_interval = None
        if options.get("rotate_bytes") is not None:
            try:
                rotate_bytes = parse_size(options["rotate_bytes"])
            except ValueError as e:
                raise _error((*path, "rotate_bytes"), str(e)) from e
        if options.get("rotate_interval") is not None:
            try:
                rotate_interval = parse_duration(options["rotate_interval"])
            except ValueError as e:
                raise _error((*path, "rotate_interval"), str(e)) from e
        fsync = options.get("fsync", False)
        if not isinstance(fsync, bool):
            raise _error((*path, "fsync"), "must be true or false")
        inline = options.get("inline", True)
        if not isinstance(inline, bool):
            raise _error((*path, "inline"), "must be true or false")
        spec = {"path": _path(options, path, kind, base_dir), "rotate_bytes": rotate_bytes,
                "rotate_interval": rotate_interval, "fsync": fsync, "inline": inline}
        return SinkSpec(kind, {**spec, **_chain_options(options, path, base_dir)})
    if kind == "stdout":
        return SinkSpec(kind)
    if kind == "sqlite":
        return SinkSpec(kind, {"path": _path(options, path, kind, base_dir),
                               "table": str(options.get("table", "audit_events"))})
    if kind == "otel":
        return SinkSpec(kind, {"signal": str(options.get("signal", "logs"))})
    target = options.get("target")
    if not isinstance(target, str):
        raise _error((*path, kind), "must name a function or sink class as 'module:name'",
                     "e.g. {callable: mypackage.audit:ship}")
    obj = load_object(target, base_dir=base_dir)
    if not isinstance(obj, type) and not callable(getattr(obj, "write", None)) \
            and not callable(obj):
        raise _error((*path, kind), f"{target!r} is neither a function nor a sink")
    return SinkSpec(kind, {"target": obj, "name": target})


def _chain_options(options: Mapping[str, Any], path: Key, base_dir: Path) -> dict[str, Any]:
    """``chain`` and ``sign_key`` of a jsonl sink: {} for a plain log, else ``chain: True``
    and the key's path (or None). The key itself is read when the sink is opened: a key
    that cannot be used then fails the guard's construction, and never turns into an
    unsigned log; what-if uses of the policy (lint, replay, explain) need no key."""
    chain = options.get("chain")
    if chain is not None and not isinstance(chain, bool):
        raise _error((*path, "chain"), "must be true or false",
                     "chain: true makes the log tamper-evident (callwarden audit verify)")
    raw = options.get("sign_key")
    if raw is None:
        return {"chain": True, "sign_key": None} if chain else {}
    if chain is False:
        raise _error((*path, "chain"), "a signed log is a chained log",
                     "drop 'chain: false', or drop 'sign_key'")
    if not isinstance(raw, str) or not raw.strip():
        raise _error((*path, "sign_key"), "needs the path of an Ed25519 private key file",
                     "e.g. sign_key: /etc/callwarden/audit.key (callwarden audit keygen "
                     "PATH writes one)")
    key = Path(raw).expanduser()
    return {"chain": True, "sign_key": key if key.is_absolute() else base_dir / key}


def build_sink(spec: SinkSpec) -> Any:
    """Opens the sink a :class:`SinkSpec` describes.

    Raises:
        ConfigError: a ``callable`` target that turned out to be neither a function nor a
            sink, or a signing key that cannot be used (missing, readable by others, not an
            Ed25519 private key).
        MissingDependency: a signing key is configured and ``cryptography`` is missing.
        OSError: the sink's file or database cannot be created.
    """
    options = dict(spec.options)
    if spec.kind == "jsonl":
        if not options.pop("chain", False):
            return JsonlSink(**options)
        try:
            return ChainedJsonlSink(**options)
        except SigningKeyError as e:  # the fix in the text: the guard reports the text only
            raise ConfigError(f"{e} ({e.hint})" if e.hint else str(e)) from e
    if spec.kind == "stdout":
        return StdoutSink()
    if spec.kind == "sqlite":
        return SQLiteSink(**options)
    if spec.kind == "otel":
        from callwarden.audit._otel import OTelSink

        return OTelSink(**options)
    obj = options["target"]
    if isinstance(obj, type):
        obj = obj()
    if callable(getattr(obj, "write", None)):
        return obj
    if not callable(obj):
        raise ConfigError(f"{options['name']!r} is neither a function nor a sink")
    return CallableSink(obj)


def _redactor(raw: Any, path: Key, base_dir: Path) -> Redactor | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _error(path, "must be a mapping of redaction options",
                     "e.g. redact: {keys: [ssn], patterns: {ticket: 'TCK-[0-9]{6}'}}")
    _keys(raw, path, _REDACT, "redact")
    kwargs: dict[str, Any] = {}
    if "keys" in raw:
        keys = raw["keys"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise _error((*path, "keys"), "must be a list of key names")
        kwargs["keys"] = keys
    if "default_keys" in raw:
        if not isinstance(raw["default_keys"], bool):
            raise _error((*path, "default_keys"), "must be true or false")
        kwargs["default_keys"] = raw["default_keys"]
    if "patterns" in raw:
        patterns = raw["patterns"]
        if not isinstance(patterns, Mapping) or not all(
                isinstance(v, str) for v in patterns.values()):
            raise _error((*path, "patterns"), "must map names to regular expressions",
                         "e.g. patterns: {ticket: 'TCK-[0-9]{6}'}")
        kwargs["patterns"] = {str(k): v for k, v in patterns.items()}
    if "detectors" in raw:
        names = raw["detectors"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _error((*path, "detectors"), "must be a list of detector or family names",
                         "e.g. detectors: [secret, pii]")
        kwargs["detectors"] = names
    for key in ("max_string", "max_bytes"):
        if key in raw:
            try:
                kwargs[key] = parse_size(raw[key])
            except ValueError as e:
                raise _error((*path, key), str(e)) from e
    if "callback" in raw:
        if not isinstance(raw["callback"], str):
            raise _error((*path, "callback"), "must name a function as 'module:name'")
        try:
            kwargs["callback"] = load_object(raw["callback"], base_dir=base_dir)
        except ImportError as e:
            raise _error((*path, "callback"), str(e)) from e
    try:
        return Redactor(**kwargs)
    except UnknownDetector as e:
        hint = f"did you mean '{e.suggestion}'?" if e.suggestion else None
        raise _error((*path, "detectors"), str(e), hint) from e
    except ValueError as e:
        raise _error((*path, "patterns"), str(e)) from e
