"""The result types of shell-command analysis: immutable, hashable, cheap to share."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["UNKNOWN_OPERAND", "CommandAnalysis", "Pipeline", "SimpleCommand"]

# An operand whose value is only known at run time (``ls / | xargs rm -rf``): rules on
# operands treat it as possibly any path, the root directory included. NUL cannot occur in argv.
UNKNOWN_OPERAND = "\x00unknown"


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command the shell would run, after static expansion and canonicalization.

    Attributes:
        program: canonical basename of the program (``/bin/rm``, ``\\rm``, ``r''m`` -> ``rm``),
            or None when it cannot be known statically (it comes from a variable, a
            substitution, ...).
        argv: the words after static expansion (quotes removed, ``~``/``$HOME``/braces/
            ``${IFS}`` expanded); ``argv[0]`` is the program word as written after expansion.
            Words that stay dynamic keep their source text (``$USER``).
        flags: canonical names of the options given (``-rf`` -> ``{"recursive", "force"}``).
        options: ``(canonical flag, value or None)`` pairs in order, for value-taking options.
        positionals: the non-option arguments in order (a subcommand included).
        subcommand: the subcommand of programs that have them (``git push`` -> ``push``).
        wrappers: the wrappers the command runs under, outermost first (``("sudo",)``).
        text: the source text of the command.
        cwd: the working directory the command runs in, when known (relative operands are
            compared against protected paths after resolving them there).
    """

    program: str | None
    argv: tuple[str, ...]
    flags: frozenset[str] = frozenset()
    options: tuple[tuple[str, str | None], ...] = ()
    positionals: tuple[str, ...] = ()
    subcommand: str | None = None
    wrappers: tuple[str, ...] = ()
    text: str = ""
    cwd: str | None = field(default=None, compare=False)

    def has_flag(self, *names: str) -> bool:
        """Returns whether any of the canonical flag ``names`` was given."""
        return any(name in self.flags for name in names)

    def option_values(self, name: str) -> tuple[str, ...]:
        """Returns every value given to the canonical option ``name``."""
        return tuple(value for key, value in self.options if key == name and value is not None)


Pipeline = tuple[SimpleCommand, ...]


@dataclass(frozen=True, slots=True)
class CommandAnalysis:
    """What a shell command line would do, as far as it can be known without running it.

    Attributes:
        source: the command line analysed.
        commands: every simple command reached, nested ones included (``sh -c``, ``eval``,
            ``$(...)``, ``xargs``, ``find -exec``, wrappers stripped), in source order.
        pipelines: pipelines of two or more stages, each a tuple of its stages' commands.
        reads: paths the command reads (``<``, ``cat``, ``head``, ``cp`` sources, ``tar c``,
            ``curl -d @file``, ``scp`` sources, ``source`` ...).
        writes: paths the command writes or deletes (``>``, ``>>``, ``tee``, ``cp``/``mv``
            destinations, ``dd of=``, ``rm``, ``truncate``, ``curl -o`` ...).
        deletes: paths the command deletes, normalized like ``writes``: ``rm`` (``-r`` or
            not), ``rmdir``, ``unlink``, ``shred``, what ``find -delete`` / ``-exec rm``
            selects (``start/**/name``), an ``rsync --delete`` destination (``dest/**``), and
            the same done by inline code (``shutil.rmtree``). An operand known only at run
            time keeps its ``$`` text or is ``UNKNOWN_OPERAND``.
        empties: files the command empties or shrinks in place: ``truncate -s 0`` (or any
            shrinking size), a bare redirection (``> f``, ``: > f``), ``cp /dev/null f``.
        environment: environment variables whose values the command shows: names echoed or
            printed (``echo $TOKEN``, ``printenv HOME``) or read by inline code
            (``os.environ['X']``), ``*`` for the whole environment (``env``, ``export -p``,
            ``print(os.environ)``), ``*TEXT*`` for a listing filtered by ``grep TEXT``.
        opaque: why parts of the command cannot be known statically, one reason each.
        parse_error: why the command could not be analysed, or None.
        home: the home directory used to expand ``~`` and ``$HOME`` (None: left as ``~``).
        cwd: the working directory relative paths were resolved against (None: left relative).
        programs: the set of known program names in ``commands``.
    """

    source: str
    commands: tuple[SimpleCommand, ...] = ()
    pipelines: tuple[Pipeline, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    empties: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()
    opaque: tuple[str, ...] = ()
    parse_error: str | None = None
    home: str | None = None
    cwd: str | None = None
    programs: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def is_opaque(self) -> bool:
        """Whether some part of the command cannot be known statically."""
        return bool(self.opaque)

    @property
    def ok(self) -> bool:
        """Whether the command was parsed and is fully known (no parse error, nothing opaque)."""
        return self.parse_error is None and not self.opaque
