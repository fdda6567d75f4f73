"""Tool profiles: what a tool *is*, so one policy serves every framework's tool names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = [
    "ARG_ROLES",
    "KNOWN_KINDS",
    "SideEffect",
    "ToolProfile",
    "default_profile",
    "untrusted_output",
]


class SideEffect(StrEnum):
    """What running a tool can do to the world."""

    NONE = "none"
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    EXTERNAL = "external"


KNOWN_KINDS = frozenset({
    "shell", "file.read", "file.write", "http", "search", "email", "message", "payment", "sql",
    "code", "mcp", "unknown",
})

# The argument roles a profile can name, and the argument names tried when a profile does not.
ARG_ROLES: Mapping[str, tuple[str, ...]] = {
    "command": ("command", "cmd", "script", "commands"),
    "path": ("path", "file_path", "filepath", "filePath", "filename", "file", "notebook_path",
             "notebookPath", "dir_path", "dirPath", "directory", "target_file", "targetFile",
             "TargetFile", "absolute_path", "absolutePath", "AbsolutePath", "uri", "fileUri",
             "relative_workspace_path"),
    "url": ("url", "uri", "href", "endpoint"),
    "recipient": ("to", "recipient", "recipients", "email", "cc", "bcc", "attendees",
                  "participants", "invitees", "guests", "share_with", "shared_with"),
    "amount": ("amount", "value", "sum"),
    # The party paid (an IBAN, an account), the free text a call sends, a file by its id.
    "payee": ("iban", "payee", "payee_iban", "beneficiary", "account", "account_number",
              "to_account"),
    "text": ("body", "text", "message", "content", "subject", "html", "markdown", "comment",
             "description"),
    "file_id": ("file_id", "fileId", "document_id", "documentId", "doc_id"),
    # Whom a booking, a ticket or an invitation is for, by name.
    "person": ("passenger", "passengers", "passenger_name", "traveler", "travelers",
               "traveller", "travellers", "guest_name", "guest_names", "full_name", "attendee_name",
               "holder_name"),
    "query": ("query", "sql", "statement"),
    "code": ("code", "source"),
    # The file glob a search tool is restricted to (Grep's ``glob``, Gemini's ``include``).
    "glob": ("glob", "include", "includes", "file_glob"),
    # Where a shell tool runs its command (Codex's ``workdir``, Gemini CLI's ``dir_path``).
    "cwd": ("cwd", "workdir", "working_directory", "workingDirectory", "working_dir", "dir_path",
            "directory"),
}

_KIND_ROLES: Mapping[str, str] = {
    "shell": "command", "file.read": "path", "file.write": "path", "http": "url",
    "email": "recipient", "message": "recipient", "payment": "amount", "sql": "query",
    "code": "code", "search": "query",
}

_KIND_SIDE_EFFECT: Mapping[str, SideEffect] = {
    "shell": SideEffect.DESTRUCTIVE, "file.read": SideEffect.READ,
    "file.write": SideEffect.WRITE, "http": SideEffect.EXTERNAL, "search": SideEffect.READ,
    "email": SideEffect.EXTERNAL, "message": SideEffect.EXTERNAL,
    "payment": SideEffect.EXTERNAL, "sql": SideEffect.WRITE, "code": SideEffect.DESTRUCTIVE,
}


@dataclass(frozen=True, slots=True)
class ToolProfile:
    """What a tool is: its kind, which argument holds what, its side effect, approval needs.

    Attributes:
        name: the tool name this profile describes.
        kind: ``shell``, ``file.read``, ``file.write``, ``http``, ``email``, ``payment``, ...
        args: argument role -> argument name (``{"command": "cmd"}``); roles not named here
            fall back to the usual names (``command``, ``cmd``, ``path``, ``file_path``, ...).
        side_effect: ``none | read | write | destructive | external``, or None when unknown.
        requires_approval: ``True`` always asks, ``False`` exempts the tool from ``ask`` rules,
            ``None`` leaves it to the rules.
        source: where the profile was declared (``policy.yaml:12``), or ``builtin``.
    """

    name: str
    kind: str = "unknown"
    args: Mapping[str, str] = field(default_factory=dict)
    #: role -> every argument playing it (``{"recipient": ("to", "cc", "bcc")}``), from the
    #: profile's ``roles:``; a role not named here falls back on ``args`` and the usual names.
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Whether what the tool returns is untrusted content (a web page, an inbound message):
    #: True / False as the profile's ``output: untrusted | trusted`` says, None for the
    #: default (``untrusted_output``).
    untrusted: bool | None = None
    side_effect: SideEffect | None = None
    requires_approval: bool | None = None
    source: str = "builtin"
    #: role -> (its argument names, their set, whether one is dotted): found once per role
    #: (``values`` runs for every rule reading a role, on every call).
    _role_names: dict[str, tuple[tuple[str, ...], frozenset[str], bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def arg_name(self, role: str) -> str | None:
        """Returns the declared argument name for ``role``, or None."""
        return self.args.get(role)

    def get(self, args: Mapping[str, Any], role: str) -> Any:
        """Returns the value of the argument playing ``role`` in ``args``, or None."""
        name = self.args.get(role)
        if name is not None:
            return args.get(name)
        for candidate in ARG_ROLES.get(role, (role,)):
            if candidate in args:
                return args[candidate]
        return None

    def arg_names(self, role: str) -> tuple[str, ...]:
        """The names of the arguments that play ``role``: those the profile's ``roles:``
        gives, else its ``args:`` entry, else the usual names of that role."""
        names = self.roles.get(role)
        if names is not None:
            return names
        name = self.args.get(role)
        return (name,) if name is not None else ARG_ROLES.get(role, (role,))

    def role_names(self, role: str) -> tuple[tuple[str, ...], frozenset[str], bool]:
        """The names of the arguments playing ``role`` (see ``arg_names``), their set, and
        whether one is dotted; found once per role."""
        found = self._role_names.get(role)
        if found is None:
            names = self.arg_names(role)
            found = self._role_names[role] = (names, frozenset(names),
                                              any("." in name for name in names))
        return found

    def values(self, args: Mapping[str, Any], role: str) -> tuple[Any, ...]:
        """Every value playing ``role`` in ``args``: each named argument that is present (a
        dotted name reaches into a nested mapping), a list's items one by one."""
        names, nameset, dotted = self._role_names.get(role) or self.role_names(role)
        if not dotted:
            # A call has a few arguments and a role many names: its arguments are looked up.
            present = None
            for name in args:
                if name in nameset:
                    if present is not None:  # several: taken in the order the role names them
                        names = tuple(name for name in names if name in args)
                        break
                    present = name
            else:
                if present is None:
                    return ()  # the usual case for most roles of most tools: no argument plays it
                value = args[present]  # one (the usual case when any does)
                if isinstance(value, _SEQUENCES):
                    return tuple(v for v in value if v is not None)
                return () if value is None else (value,)
        out: list[Any] = []
        for name in names:
            value = _lookup(args, name)
            if value is None:
                continue
            if isinstance(value, _SEQUENCES):
                out.extend(v for v in value if v is not None)
            else:
                out.append(value)
        return tuple(out)

    @property
    def primary_role(self) -> str | None:
        """The role of the argument that says what the call does (command, path, url, ...)."""
        return _KIND_ROLES.get(self.kind)

    def primary(self, args: Mapping[str, Any]) -> Any:
        """Returns the value of the primary argument (the command, path, url ...), or None."""
        role = self.primary_role
        return None if role is None else self.get(args, role)

    def merged(self, **changes: Any) -> ToolProfile:
        """Returns a copy with ``changes`` applied."""
        return replace(self, **changes)


_SEQUENCES = (list, tuple)


def _lookup(args: Mapping[str, Any], name: str) -> Any:
    value = args.get(name)
    if value is not None or "." not in name:
        return value
    current: Any = args
    for part in name.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _table(kind: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, kind)


# Defaults for the tool names of well-known agents and frameworks (Claude Code and its older
# names, Gemini CLI, Codex, OpenHands, Amazon Q, Cline, Cursor, Windsurf, VS Code Copilot,
# Continue, OpenAI Agents SDK, LangChain community tools, MCP reference servers, the browser
# MCP servers).
_DEFAULT_KINDS: Mapping[str, str] = {
    **_table("shell", "bash", "Bash", "shell", "sh", "run_shell_command", "shell_command",
             "local_shell", "execute_command", "run_command", "terminal", "exec", "exec_command",
             "run_terminal_cmd", "execute_bash", "executeBash", "run_bash",
             "execute_shell", "execute_shell_command", "run_in_terminal",
             "run_terminal_command", "builtin_run_terminal_command"),
    **_table("file.read", "read_file", "Read", "read", "cat", "view", "open_file",
             "read_text_file", "read_many_files", "read_multiple_files", "Glob", "Grep", "LS",
             "grep_search", "search_file_content",
             "glob", "grep", "list_directory", "list_dir", "ls", "search_files", "get_file_info",
             "read_media_file", "directory_tree", "View", "NotebookRead", "GlobTool",
             "GrepTool", "view_file", "fs_read", "list_files", "builtin_read_file",
             "list_code_definition_names", "read_notebook", "list_directory_with_sizes",
             "file_search", "view_image"),
    **_table("file.write", "write_file", "Write", "Edit", "MultiEdit", "NotebookEdit",
             "edit_file", "create_file", "replace", "write", "delete_file", "move_file",
             "create_directory", "apply_patch", "str_replace_editor", "str_replace",
             "Replace", "write_to_file", "replace_in_file", "insert_edit_into_file",
             "replace_string_in_file", "fs_write", "builtin_create_new_file",
             "builtin_edit_existing_file", "file_delete", "copy_file", "edit_notebook",
             "rename_file"),
    **_table("http", "fetch", "WebFetch", "web_fetch", "http_request", "http_get", "requests_get",
             "requests_post", "curl", "browse", "open_url",
             # A browser sent to a URL (Playwright's, Puppeteer's and Chrome DevTools' MCP
             # servers) reaches it as a fetch does, and what it shows is the web's content.
             "browser_navigate", "puppeteer_navigate", "navigate_page"),
    **_table("search", "WebSearch", "web_search", "google_web_search", "search"),
    **_table("email", "send_email", "send_mail", "email", "gmail_send", "send_message_email"),
    **_table("message", "send_message", "slack_post_message", "post_message", "send_slack"),
    **_table("payment", "send_money", "transfer_money", "make_payment", "create_payment", "pay",
             "transfer"),
    **_table("sql", "sql_query", "run_sql", "execute_sql", "query_database", "sql_db_query"),
    **_table("code", "python", "run_python", "execute_python", "python_repl", "code_interpreter",
             "run_code", "execute_code"),
}


# Tools whose ``pattern`` argument is a file glob (elsewhere ``pattern`` is a regex to search).
_DEFAULT_ARGS: Mapping[str, Mapping[str, str]] = {
    "Glob": {"glob": "pattern"}, "glob": {"glob": "pattern"}, "GlobTool": {"glob": "pattern"},
    "search_files": {"glob": "pattern"}, "file_search": {"glob": "pattern"},
}


def default_profile(name: str) -> ToolProfile:
    """Returns the built-in profile for a tool name (``unknown`` kind when not well known)."""
    kind = _DEFAULT_KINDS.get(name)
    if kind is None and name.startswith("mcp__"):
        # mcp__<server>__<tool>: a well-known tool name served over MCP is still that kind of
        # tool (mcp__filesystem__read_file reads files), so path and shell rules apply to it.
        kind = _DEFAULT_KINDS.get(name.rpartition("__")[2], "mcp")
    if kind is None:
        return ToolProfile(name=name)
    args = _DEFAULT_ARGS.get(name.rpartition("__")[2], {})
    return ToolProfile(name=name, kind=kind, args=args, side_effect=_KIND_SIDE_EFFECT.get(kind))


# Tools whose output is, by default, content from outside: the web, inbound mail and chat.
_UNTRUSTED_KINDS = frozenset({"http", "search"})
_UNTRUSTED_NAMES = frozenset({
    "read_email", "get_email", "list_emails", "search_emails", "read_inbox", "get_emails",
    "gmail_read", "gmail_search", "read_message", "read_messages", "get_messages",
    "list_messages", "slack_read", "slack_history", "read_channel", "get_channel_history",
})


def untrusted_output(profile: ToolProfile) -> bool:
    """Whether a tool's output counts as untrusted content: as its profile says, else for web
    fetch and search tools and tools that read inbound mail or chat."""
    if profile.untrusted is not None:
        return profile.untrusted
    return profile.kind in _UNTRUSTED_KINDS or \
        profile.name.rpartition("__")[2] in _UNTRUSTED_NAMES


def kind_side_effect(kind: str) -> SideEffect | None:
    """Returns the usual side effect of a tool kind."""
    return _KIND_SIDE_EFFECT.get(kind)
