"""What callwarden knows about common programs: option aliases, value-taking options,
subcommands, wrappers and interpreters.

Option tables are written as ``"canonical[=]: -x -y --long"``; a trailing ``=`` on the
canonical name means the option takes a value. Canonical names are what ``flags`` holds, so
``-r``, ``-R`` and ``--recursive`` of ``rm`` all read ``recursive``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "AWKS",
    "DECODERS",
    "DOWNLOADERS",
    "GIT_COMMAND_CONFIG",
    "GIT_COMMAND_VARIABLES",
    "INTERPRETERS",
    "KNOWN_PROGRAMS",
    "PRIVILEGED_WRAPPERS",
    "SHELLS",
    "WRAPPERS",
    "OptionSpec",
    "program_family",
    "spec_for",
]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """How one program (or subcommand) spells its options.

    Attributes:
        names: spelled option (``-r``, ``--recursive``) -> canonical name.
        values: canonical names of options that take a value.
        single_dash_long: ``-name`` is one option (find, terraform), not a cluster of letters.
        subcommands: per-subcommand specs; present (even empty) when the program has them.
        keyvalue: ``key=value`` operands are options (dd).
        dash_positional: regex for dash-words that are operands, not options (chmod ``-x``).
        merge_parent: subcommand specs also accept the parent's options (kubectl).
    """

    names: Mapping[str, str] = field(default_factory=dict)
    values: frozenset[str] = frozenset()
    single_dash_long: bool = False
    subcommands: Mapping[str, OptionSpec] | None = None
    keyvalue: bool = False
    dash_positional: re.Pattern[str] | None = None
    merge_parent: bool = False

    def canonical(self, spelled: str) -> str:
        """Returns the canonical name of a spelled option (``-r`` -> ``recursive``).

        GNU tools accept any unambiguous prefix of a long option (``--recur`` is
        ``--recursive``), so a prefix naming one option only reads as that option.
        """
        name = self.names.get(spelled)
        if name is not None:
            return name
        if spelled.startswith("--") and len(spelled) > 3:
            found = {canonical for option, canonical in self.names.items()
                     if option.startswith(spelled) and option.startswith("--")}
            if len(found) == 1:
                return found.pop()
        return spelled.lstrip("-")


def _spec(
    table: str = "",
    *,
    single_dash_long: bool = False,
    subcommands: Mapping[str, OptionSpec] | None = None,
    keyvalue: bool = False,
    dash_positional: str | None = None,
    merge_parent: bool = False,
    parent: OptionSpec | None = None,
) -> OptionSpec:
    names: dict[str, str] = dict(parent.names) if parent is not None and merge_parent else {}
    values: set[str] = set(parent.values) if parent is not None and merge_parent else set()
    for group in table.split(";"):
        group = group.strip()
        if not group:
            continue
        canonical, _, spellings = group.partition(":")
        canonical = canonical.strip()
        if canonical.endswith("="):
            canonical = canonical[:-1]
            values.add(canonical)
        for spelled in spellings.split():
            names[spelled] = canonical
    return OptionSpec(
        names=names,
        values=frozenset(values),
        single_dash_long=single_dash_long,
        subcommands=subcommands,
        keyvalue=keyvalue,
        dash_positional=re.compile(dash_positional) if dash_positional else None,
        merge_parent=merge_parent,
    )


DEFAULT_SPEC = OptionSpec()

_RM = _spec(
    "recursive: -r -R --recursive; force: -f --force; interactive: -i -I --interactive;"
    "dir: -d --dir; verbose: -v --verbose; no-preserve-root: --no-preserve-root;"
    "preserve-root: --preserve-root; one-file-system: --one-file-system"
)
_CHMOD = _spec(
    "recursive: -R --recursive; changes: -c --changes; silent: -f --silent --quiet;"
    "verbose: -v --verbose; reference=: --reference",
    dash_positional=r"^-[rwxXstugoa+=,0-7-]+$",
)
_CHOWN = _spec(
    "recursive: -R --recursive; no-dereference: -h --no-dereference; changes: -c --changes;"
    "silent: -f --silent --quiet; verbose: -v --verbose; reference=: --reference; from=: --from"
)
_CP = _spec(
    "recursive: -r -R --recursive; archive: -a --archive; force: -f --force;"
    "interactive: -i --interactive; no-clobber: -n --no-clobber; verbose: -v --verbose;"
    "target-directory=: -t --target-directory; no-target-directory: -T --no-target-directory;"
    "update: -u --update; link: -l --link; symbolic-link: -s --symbolic-link;"
    "backup: -b; suffix=: -S --suffix; parents: --parents; preserve: -p; dereference: -L"
)
_MV = _spec(
    "force: -f --force; interactive: -i --interactive; no-clobber: -n --no-clobber;"
    "verbose: -v --verbose; target-directory=: -t --target-directory; update: -u --update;"
    "no-target-directory: -T --no-target-directory; backup: -b; suffix=: -S --suffix"
)
_FIND_VALUES = (
    "name iname path ipath wholename iwholename regex iregex type xtype user group perm size "
    "mtime mmin atime amin ctime cmin newer anewer cnewer maxdepth mindepth fstype inum links "
    "uid gid samefile printf fprintf fprint fprint0 fls used context lname ilname regextype D"
)
_FIND = _spec(
    ";".join(f"{v}=: -{v}" for v in _FIND_VALUES.split())
    + "; delete: -delete; L: -L; H: -H; P: -P",
    single_dash_long=True,
)
_CURL = _spec(
    "request=: -X --request; data=: -d --data --data-binary --data-raw --data-ascii"
    " --data-urlencode; json=: --json; form=: -F --form --form-string; header=: -H --header;"
    "output=: -o --output; remote-name: -O --remote-name; upload-file=: -T --upload-file;"
    "user=: -u --user; user-agent=: -A --user-agent; referer=: -e --referer;"
    "cookie=: -b --cookie; cookie-jar=: -c --cookie-jar; proxy=: -x --proxy;"
    "max-time=: -m --max-time; write-out=: -w --write-out; config=: -K --config; url=: --url;"
    "silent: -s --silent; show-error: -S --show-error; fail: -f --fail;"
    "location: -L --location; insecure: -k --insecure; head: -I --head; include: -i --include;"
    "verbose: -v --verbose; get: -G --get; continue-at=: -C --continue-at; range=: -r --range;"
    "retry=: --retry; connect-timeout=: --connect-timeout; output-dir=: --output-dir;"
    "resolve=: --resolve; cacert=: --cacert; cert=: -E --cert; key=: --key;"
    "oauth2-bearer=: --oauth2-bearer; netrc: -n --netrc; netrc-file=: --netrc-file;"
    "proto=: --proto; tlsv1.2: --tlsv1.2; compressed: --compressed; remote-name-all:"
    " --remote-name-all; create-dirs: --create-dirs"
)
_WGET = _spec(
    "output-document=: -O --output-document; output-file=: -o --output-file;"
    "quiet: -q --quiet; post-data=: --post-data; post-file=: --post-file;"
    "body-file=: --body-file; body-data=: --body-data; method=: --method; header=: --header;"
    "directory-prefix=: -P --directory-prefix; input-file=: -i --input-file;"
    "continue: -c --continue; recursive: -r --recursive; mirror: -m --mirror;"
    "user=: --user; password=: --password; tries=: -t --tries; timeout=: -T --timeout;"
    "user-agent=: -U --user-agent; background: -b --background; spider: --spider;"
    "execute=: -e --execute; no-check-certificate: --no-check-certificate"
)
_TAR = _spec(
    "create: -c --create; extract: -x --extract --get; list: -t --list; append: -r --append;"
    "update: -u --update; gzip: -z --gzip; bzip2: -j --bzip2; xz: -J --xz; zstd: --zstd;"
    "verbose: -v --verbose; file=: -f --file; directory=: -C --directory;"
    "files-from=: -T --files-from; exclude=: --exclude; preserve-permissions: -p;"
    "keep-old-files: -k; overwrite: --overwrite; remove-files: --remove-files;"
    "to-stdout: -O --to-stdout; absolute-names: -P --absolute-names; transform=: --transform;"
    "strip-components=: --strip-components; auto-compress: -a --auto-compress;"
    "checkpoint-action=: --checkpoint-action; use-compress-program=: -I --use-compress-program;"
    "to-command=: --to-command; info-script=: -F --info-script --new-volume-script;"
    "checkpoint=: --checkpoint"
)
_GIT_SUBS = {
    "push": _spec(
        "force: -f --force; force-with-lease: --force-with-lease; force-if-includes:"
        " --force-if-includes; delete: -d --delete; all: --all; mirror: --mirror; tags: --tags;"
        "prune: --prune; set-upstream: -u --set-upstream; dry-run: -n --dry-run; quiet: -q;"
        "verbose: -v; push-option=: -o --push-option; repo=: --repo; no-verify: --no-verify"
    ),
    "clean": _spec(
        "force: -f --force; d: -d; x: -x; X: -X; dry-run: -n --dry-run;"
        "interactive: -i --interactive; quiet: -q --quiet; exclude=: -e --exclude"
    ),
    "reset": _spec("hard: --hard; soft: --soft; mixed: --mixed; keep: --keep; merge: --merge;"
                   "quiet: -q; patch: -p"),
    "checkout": _spec("b=: -b; B=: -B; force: -f --force; orphan=: --orphan; track: -t --track;"
                      "detach: --detach; patch: -p; quiet: -q"),
    "switch": _spec("create=: -c --create; force-create=: -C --force-create;"
                    "force: -f --force --discard-changes; detach: -d --detach"),
    "commit": _spec(
        "message=: -m --message; all: -a --all; amend: --amend; file=: -F --file;"
        "no-verify: -n --no-verify; signoff: -s --signoff; author=: --author; date=: --date;"
        "reuse-message=: -C --reuse-message; reedit-message=: -c --reedit-message;"
        "fixup=: --fixup; squash=: --squash; allow-empty: --allow-empty"
    ),
    "branch": _spec("delete: -d --delete; force-delete: -D; force: -f --force; move: -m --move;"
                    "force-move: -M; all: -a --all; remotes: -r --remotes; list: -l --list;"
                    "verbose: -v --verbose; set-upstream-to=: -u --set-upstream-to"),
    "rm": _spec("recursive: -r; force: -f --force; cached: --cached; quiet: -q; dry-run: -n"),
    "rebase": _spec("interactive: -i --interactive; onto=: --onto; exec=: -x --exec;"
                    "strategy=: -s --strategy; strategy-option=: -X --strategy-option"),
    "log": _spec("n=: -n --max-count; format=: --format; pretty=: --pretty; author=: --author;"
                 "grep=: --grep; since=: --since; until=: --until"),
    "fetch": _spec("all: --all; prune: -p --prune; tags: -t --tags; force: -f --force;"
                   "depth=: --depth"),
    "add": _spec("all: -A --all; force: -f --force; patch: -p --patch; update: -u --update;"
                 "interactive: -i --interactive"),
    "filter-branch": _spec("force: -f --force"),
    "gc": _spec("aggressive: --aggressive"),
}
_GIT = _spec(
    "C=: -C; config=: -c; git-dir=: --git-dir; work-tree=: --work-tree; namespace=: --namespace;"
    "no-pager: --no-pager; paginate: -p --paginate; bare: --bare",
    subcommands=_GIT_SUBS,
)
_KUBECTL_TOP = _spec(
    "namespace=: -n --namespace; all-namespaces: -A --all-namespaces; context=: --context;"
    "kubeconfig=: --kubeconfig; filename=: -f --filename; selector=: -l --selector;"
    "output=: -o --output; all: --all; force: --force; grace-period=: --grace-period;"
    "recursive: -R --recursive; container=: -c --container; stdin: -i --stdin; tty: -t --tty;"
    "cascade=: --cascade; cluster=: --cluster; user=: --user; server=: -s --server"
)
_KUBECTL = OptionSpec(
    names=_KUBECTL_TOP.names, values=_KUBECTL_TOP.values, subcommands={}, merge_parent=True
)
_DOCKER_RUN = (
    "volume=: -v --volume; env=: -e --env; publish=: -p --publish; name=: --name;"
    "workdir=: -w --workdir; user=: -u --user; interactive: -i --interactive; tty: -t --tty;"
    "detach: -d --detach; rm: --rm; privileged: --privileged; network=: --network;"
    "entrypoint=: --entrypoint; mount=: --mount; env-file=: --env-file; pid=: --pid;"
    "cap-add=: --cap-add; security-opt=: --security-opt; label=: -l --label;"
    "hostname=: -h --hostname; platform=: --platform"
)
_DOCKER_PRUNE = _spec("all: -a --all; force: -f --force; volumes: --volumes; filter=: --filter")
_DOCKER = _spec(
    "host=: -H --host; context=: -c --context; config=: --config; log-level=: -l --log-level;"
    "debug: -D --debug",
    subcommands={
        "run": _spec(_DOCKER_RUN), "create": _spec(_DOCKER_RUN), "exec": _spec(_DOCKER_RUN),
        "rm": _spec("force: -f --force; volumes: -v --volumes; link: -l --link"),
        "rmi": _spec("force: -f --force"),
        "system": _DOCKER_PRUNE, "volume": _DOCKER_PRUNE, "image": _DOCKER_PRUNE,
        "container": _DOCKER_PRUNE, "network": _DOCKER_PRUNE, "builder": _DOCKER_PRUNE,
        "compose": _spec("file=: -f --file; project-name=: -p --project-name; detach: -d"
                         " --detach; volumes: -v --volumes; rmi=: --rmi"),
    },
)
_AWS = _spec(
    "profile=: --profile; region=: --region; output=: --output; endpoint-url=: --endpoint-url;"
    "query=: --query; debug: --debug; recursive: --recursive; exclude=: --exclude;"
    "include=: --include; dryrun: --dryrun; force: --force; quiet: --quiet; acl=: --acl;"
    "delete: --delete",
    subcommands={},
    merge_parent=True,
)
_TERRAFORM = _spec(
    "auto-approve: -auto-approve --auto-approve; destroy: -destroy --destroy;"
    "target=: -target --target; var=: -var --var; var-file=: -var-file --var-file;"
    "chdir=: -chdir --chdir; recursive: -recursive --recursive; force: -force --force",
    single_dash_long=True,
    subcommands={},
    merge_parent=True,
)
_PKG = _spec(
    "global: -g --global; save-dev: -D --save-dev; force: -f --force; prefix=: --prefix;"
    "registry=: --registry; yes: -y --yes; user: --user; upgrade: -U --upgrade;"
    "requirement=: -r --requirement; index-url=: -i --index-url;"
    "extra-index-url=: --extra-index-url; target=: -t --target; editable=: -e --editable;"
    "break-system-packages: --break-system-packages",
    subcommands={},
    merge_parent=True,
)
_SUBCOMMAND_ONLY = OptionSpec(subcommands={}, merge_parent=True)
_PSQL = _spec("command=: -c --command; dbname=: -d --dbname; host=: -h --host; port=: -p --port;"
              "username=: -U --username; file=: -f --file; output=: -o --output;"
              "set=: -v --set --variable")
_MYSQL = _spec("execute=: -e --execute; user=: -u --user; host=: -h --host;"
               "database=: -D --database; port=: -P --port")
_SED = _spec("in-place: -i --in-place; expression=: -e --expression; file=: -f --file;"
             "quiet: -n --quiet --silent; regexp-extended: -E -r --regexp-extended;"
             "separate: -s --separate; null-data: -z --null-data")
_GREP = _spec(
    "regexp=: -e --regexp; file=: -f --file; recursive: -r -R --recursive"
    " --dereference-recursive; ignore-case: -i --ignore-case; line-number: -n --line-number;"
    "count: -c --count; files-with-matches: -l --files-with-matches; invert-match: -v"
    " --invert-match; word-regexp: -w --word-regexp; include=: --include; exclude=: --exclude;"
    "exclude-dir=: --exclude-dir; max-count=: -m --max-count; after-context=: -A;"
    "before-context=: -B; context=: -C; extended-regexp: -E; fixed-strings: -F;"
    "perl-regexp: -P; quiet: -q --quiet; only-matching: -o; glob=: -g --glob; type=: -t"
)
_AWK = _spec("file=: -f --file; source=: -e --source; assign=: -v --assign;"
             "field-separator=: -F --field-separator")
_HEAD = _spec("lines=: -n --lines; bytes=: -c --bytes; follow: -f --follow -F; quiet: -q")
_BASE64 = _spec("decode: -d --decode -D; wrap=: -w --wrap -b --break; ignore-garbage: -i")
_XXD = _spec(
    "reverse: -r -revert; plain: -p -ps -postscript -plain; cols=: -c -cols; len=: -l -len;"
    "seek=: -s -seek; groupsize=: -g -groupsize; uppercase: -u; include: -i -include;"
    "bits: -b -bits; little-endian: -e",
    single_dash_long=True,
)
_TEE = _spec("append: -a --append; ignore-interrupts: -i --ignore-interrupts")
_TRUNCATE = _spec("size=: -s --size; reference=: -r --reference; no-create: -c --no-create")
_SHRED = _spec("remove: -u --remove; zero: -z --zero; iterations=: -n --iterations;"
               "force: -f --force; verbose: -v; exact: -x --exact; size=: -s --size")
_SSH = _spec(
    "identity=: -i; port=: -p; login=: -l; option=: -o; config=: -F; local-forward=: -L;"
    "remote-forward=: -R; dynamic-forward=: -D; jump=: -J; bind=: -b; cipher=: -c; E=: -E;"
    "escape=: -e; mac=: -m; ctl=: -O; Q=: -Q; socket=: -S; W=: -W; tun=: -w"
)
_SCP = _spec("identity=: -i; port=: -P; option=: -o; config=: -F; limit=: -l; cipher=: -c;"
             "jump=: -J; program=: -S; recursive: -r")
_RSYNC = _spec("archive: -a --archive; recursive: -r --recursive; verbose: -v; compress: -z;"
               "delete: --delete; exclude=: --exclude; include=: --include; rsh=: -e --rsh;"
               "dry-run: -n --dry-run; remove-source-files: --remove-source-files")
_NC = _spec("exec=: -e --exec; command=: -c --sh-exec; listen: -l --listen; port=: -p;"
            "source=: -s; wait=: -w; verbose: -v; udp: -u; zero: -z; keep-open: -k;"
            "numeric: -n; quit=: -q")
_CRONTAB = _spec("list: -l; edit: -e; remove: -r; user=: -u")
_HISTORY = _spec("clear: -c; delete=: -d")
_PYTHON = _spec("command=: -c; module=: -m; W=: -W; X=: -X")
_PERL = _spec("e=: -e -E; I=: -I; M=: -M")
_RUBY = _spec("e=: -e; r=: -r; I=: -I")
_NODE = _spec("eval=: -e --eval; print=: -p --print; require=: -r --require")
_PHP = _spec("r=: -r")
_SHELL = _spec("command: -c; option=: -o; login: -l --login; interactive: -i; stdin: -s;"
               "rcfile=: --rcfile --init-file")
_ECHO = OptionSpec()
_KILL = _spec("signal=: -s; n=: -n; list: -l")
_DD = OptionSpec(keyvalue=True)
# ``NAME=value`` operands of env are assignments, so ``env -u X`` or ``env A=1`` without a
# command has no operands: it prints the environment like a bare ``env``.
_ENV = _spec("unset=: -u --unset; chdir=: -C --chdir; ignore-environment: -i"
             " --ignore-environment; null: -0 --null; split-string=: -S --split-string")
_ENV = OptionSpec(names=_ENV.names, values=_ENV.values, keyvalue=True)
_COMPGEN = _spec("action=: -A; glob=: -G; wordlist=: -W; function=: -F; command=: -C;"
                 "prefix=: -P; suffix=: -S; filter=: -X")
_MKFS = _spec("type=: -t")
_SQLITE = _spec("cmd=: -cmd", single_dash_long=True)
_CHATTR = _spec("recursive: -R")
_ZIP = _spec("recursive: -r; quiet: -q; password=: -P; move: -m")
_UNZIP = _spec("directory=: -d; overwrite: -o; quiet: -q; password=: -P")
_OPENSSL = _SUBCOMMAND_ONLY
_SSH_KEYGEN = _spec("type=: -t; comment=: -C; file=: -f; passphrase=: -N; bits=: -b")
_INSTALL = _spec("mode=: -m; owner=: -o; group=: -g; target-directory=: -t; directory: -d")
_LN = _spec("symbolic: -s --symbolic; force: -f --force; target-directory=: -t")

_SPECS: dict[str, OptionSpec] = {
    "rm": _RM, "chmod": _CHMOD, "chown": _CHOWN, "chgrp": _CHOWN, "cp": _CP, "mv": _MV,
    "find": _FIND, "curl": _CURL, "wget": _WGET, "tar": _TAR, "git": _GIT,
    "kubectl": _KUBECTL, "oc": _KUBECTL, "docker": _DOCKER, "podman": _DOCKER, "aws": _AWS,
    "terraform": _TERRAFORM, "tofu": _TERRAFORM, "npm": _PKG, "pnpm": _PKG, "yarn": _PKG,
    "pip": _PKG, "uv": _PKG, "poetry": _PKG, "cargo": _SUBCOMMAND_ONLY,
    "go": _SUBCOMMAND_ONLY, "gcloud": _SUBCOMMAND_ONLY, "az": _SUBCOMMAND_ONLY,
    "helm": _SUBCOMMAND_ONLY, "systemctl": _SUBCOMMAND_ONLY, "apt": _PKG, "apt-get": _PKG,
    "brew": _PKG, "gh": _SUBCOMMAND_ONLY, "heroku": _SUBCOMMAND_ONLY, "openssl": _OPENSSL,
    "psql": _PSQL, "mysql": _MYSQL, "mariadb": _MYSQL, "sqlite3": _SQLITE, "sed": _SED,
    "grep": _GREP, "egrep": _GREP, "fgrep": _GREP, "rg": _GREP, "ag": _GREP,
    "head": _HEAD, "tail": _HEAD, "base64": _BASE64, "base32": _BASE64, "xxd": _XXD,
    "tee": _TEE, "truncate": _TRUNCATE, "shred": _SHRED, "ssh": _SSH, "scp": _SCP,
    "rsync": _RSYNC, "nc": _NC, "ncat": _NC, "netcat": _NC, "crontab": _CRONTAB,
    "history": _HISTORY, "python": _PYTHON, "perl": _PERL, "ruby": _RUBY, "node": _NODE,
    "php": _PHP, "kill": _KILL, "dd": _DD, "mkfs": _MKFS, "chattr": _CHATTR, "zip": _ZIP,
    "unzip": _UNZIP, "ssh-keygen": _SSH_KEYGEN, "install": _INSTALL, "ln": _LN,
    "echo": _ECHO, "env": _ENV, "printenv": _ENV, "compgen": _COMPGEN, "gawk": _AWK,
    "awk": _AWK, "mawk": _AWK, "nawk": _AWK, "busybox": DEFAULT_SPEC,
}

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"})
# awk programs are code: ``system("...")`` and ``print | "cmd"`` run shell commands.
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
for _shell in SHELLS:
    _SPECS[_shell] = _SHELL

# Interpreters that run inline code: program family -> the canonical option holding the code.
INTERPRETERS: Mapping[str, tuple[str, ...]] = {
    "python": ("command",), "pypy": ("command",), "perl": ("e",), "ruby": ("e",),
    "node": ("eval", "print"), "nodejs": ("eval", "print"), "deno": (), "bun": ("eval",),
    "php": ("r",), "osascript": ("e",), "lua": ("e",), "Rscript": ("e",),
}
_SPECS["pypy"] = _PYTHON
_SPECS["nodejs"] = _NODE
_SPECS["bun"] = _NODE
_SPECS["lua"] = _PERL
_SPECS["osascript"] = _PERL
_SPECS["Rscript"] = _PERL

DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "nc",
                         "ncat", "netcat", "socat", "tftp", "ftp"})
DECODERS = frozenset({"base64", "base32", "xxd", "rev", "openssl", "gunzip", "zcat", "gzip",
                      "uudecode", "tr", "printf", "basenc", "bzcat", "xzcat"})
PRIVILEGED_WRAPPERS = frozenset({"sudo", "doas", "su", "run0", "pkexec", "runuser"})


@dataclass(frozen=True, slots=True)
class WrapperSpec:
    """A program that runs another command: its own options and where the command starts.

    Attributes:
        values: spelled options taking a value (``-u`` of sudo).
        leading_positionals: positionals consumed before the command (timeout's duration).
        assignments: ``NAME=value`` words before the command are allowed (env, sudo).
        lookup_flags: flags that make it not run the command (``command -v``).
    """

    values: frozenset[str] = frozenset()
    leading_positionals: int = 0
    assignments: bool = False
    lookup_flags: frozenset[str] = frozenset()


def _wrap(values: str = "", *, leading: int = 0, assignments: bool = False,
          lookup: str = "") -> WrapperSpec:
    return WrapperSpec(frozenset(values.split()), leading, assignments, frozenset(lookup.split()))


WRAPPERS: Mapping[str, WrapperSpec] = {
    "sudo": _wrap("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r"
                  " --role -t --type -U --other-user -T --command-timeout", assignments=True,
                  lookup="-l --list -v --validate -k -K"),
    "doas": _wrap("-u -C"),
    "env": _wrap("-u --unset -C --chdir -S --split-string", assignments=True),
    "timeout": _wrap("-s --signal -k --kill-after", leading=1),
    "nice": _wrap("-n --adjustment"),
    "nohup": _wrap(),
    "command": _wrap(lookup="-v -V"),
    "exec": _wrap("-a"),
    "stdbuf": _wrap("-i --input -o --output -e --error"),
    "time": _wrap("-f --format -o --output"),
    "setsid": _wrap(),
    "ionice": _wrap("-c --class -n --classdata -p --pid -t"),
    "chronic": _wrap(),
    "unbuffer": _wrap(),
    "caffeinate": _wrap("-t -w"),
    "xargs": _wrap("-I -i -n --max-args -P --max-procs -d --delimiter -a --arg-file -L"
                   " --max-lines -s --max-chars -E -e --eof --process-slot-var"),
    "flock": _wrap("-w --timeout -E --conflict-exit-code", leading=1),
    "chroot": _wrap("--userspec --groups", leading=1),
    "taskset": _wrap(leading=1),
    "watch": _wrap("-n --interval -d"),
    "strace": _wrap("-e -o -p -s -u"),
    "ltrace": _wrap("-e -o -p -s -u"),
    # Multi-call binaries and bash builtins that just run the named command.
    "busybox": _wrap(),
    "toybox": _wrap(),
    "builtin": _wrap(),
    # GNU parallel reads its arguments from ``:::`` lists or stdin, like xargs.
    "parallel": _wrap("-j --jobs -P -S --sshlogin -I --colsep -C -n --max-args -d --delimiter"
                      " --joblog --results --tmpdir -a --arg-file --timeout"),
}

# git configuration keys and environment variables whose value is a shell command git runs.
GIT_COMMAND_CONFIG = re.compile(
    r"^(?:core\.(?:pager|editor|sshcommand|fsmonitor|askpass)|pager\..+|"
    r"sequence\.editor|diff\..*(?:external|command|textconv)|merge\..*driver|"
    r"credential\..*helper|gpg\..*program|filter\..*(?:clean|smudge|process)|"
    r"interactive\.difffilter|web\.browser|browser\..*cmd|uploadpack\.packobjectshook|"
    r"remote\..*(?:uploadpack|receivepack)|alias\..+)$",
    re.IGNORECASE,
)
GIT_COMMAND_VARIABLES = frozenset({
    "GIT_PAGER", "PAGER", "GIT_EDITOR", "EDITOR", "VISUAL", "GIT_SEQUENCE_EDITOR",
    "GIT_SSH_COMMAND", "GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND", "LESSOPEN", "LESSCLOSE",
})

KNOWN_PROGRAMS = frozenset(_SPECS) | frozenset(WRAPPERS) | frozenset({
    "cat", "tac", "less", "more", "ls", "mkfs", "wipefs", "fdisk", "sfdisk", "parted",
    "mkswap", "shutdown", "reboot", "halt", "poweroff", "useradd", "userdel", "passwd", "mount",
    "umount", "killall", "pkill", "iptables", "ufw", "systemctl", "launchctl", "rev", "printf",
    "unset", "export", "source", "eval", "mkfifo", "dig", "nslookup", "host", "telnet",
    "printenv", "set", "declare", "gpg", "zip", "tr", "awk", "gawk", "socat", "chattr", "srm",
    "blkdiscard", "mkfs.ext4", "mkfs.xfs", "mkfs.vfat", "visudo", "usermod", "ssh-copy-id",
})

_VERSION_SUFFIX = re.compile(r"[\d.]+$")
_VERSIONED = frozenset({"python", "pypy", "perl", "ruby", "node", "php", "lua", "pip", "psql",
                        "java", "gcc", "clang", "bash", "zsh", "ksh", "tclsh", "wish"})
_DOT_FAMILIES = frozenset({"mkfs", "fsck", "mount", "umount"})


@lru_cache(maxsize=4096)
def program_family(program: str) -> str:
    """The family a program belongs to: ``python3.11`` -> ``python``, ``mkfs.ext4`` -> ``mkfs``."""
    head, dot, _ = program.partition(".")
    if dot and head in _DOT_FAMILIES:
        return head
    if program[-1:].isdigit():
        stripped = _VERSION_SUFFIX.sub("", program)
        if stripped in _VERSIONED:
            return stripped
    return program


def spec_for(program: str) -> OptionSpec:
    """Returns the option spec of ``program`` (by exact name, then by family)."""
    spec = _SPECS.get(program)
    if spec is None:
        spec = _SPECS.get(program_family(program), DEFAULT_SPEC)
    return spec
