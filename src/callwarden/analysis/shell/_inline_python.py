"""Python one-liners (``python -c``) read with :mod:`ast`: the commands they run, what they do
to files (as the equivalent shell command), the environment variables they read, and what
cannot be known statically."""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Iterator

from callwarden.analysis.shell._inline_base import (
    TEMP_DIR,
    InlineEffects,
    command,
    pathlike,
    quote_path,
)

__all__ = ["python_effects"]

_MAX_NODES = 4_000
_MAX_EVAL_DEPTH = 3


def python_effects(code: str) -> InlineEffects:
    """What a Python program does, as far as it can be known statically."""
    return _Python().run(code)


# Files: the shell command that does the same thing to the named paths.
_FILE_OPS: dict[str, tuple[str, int]] = {
    # qualified name: (command template, number of path arguments)
    "shutil.rmtree": ("rm -r --", 1),
    "os.remove": ("rm --", 1),
    "os.unlink": ("rm --", 1),
    "os.rmdir": ("rmdir --", 1),
    "os.removedirs": ("rmdir --", 1),
    "os.rename": ("mv --", 2),
    "os.renames": ("mv --", 2),
    "os.replace": ("mv --", 2),
    "shutil.move": ("mv --", 2),
    "shutil.copy": ("cp --", 2),
    "shutil.copy2": ("cp --", 2),
    "shutil.copyfile": ("cp --", 2),
    "shutil.copytree": ("cp -r --", 2),
    "os.symlink": ("ln -s --", 2),
    "os.link": ("ln --", 2),
    "os.mkdir": ("mkdir -p --", 1),
    "os.makedirs": ("mkdir -p --", 1),
    "os.chdir": ("cd --", 1),
    "os.listdir": ("ls --", 1),
    "os.scandir": ("ls --", 1),
    "os.walk": ("ls -R --", 1),
}
# pathlib.Path methods: (command template, the other path argument's position or -1).
_PATH_METHODS: dict[str, tuple[str, int]] = {
    "unlink": ("rm --", -1), "rmdir": ("rmdir --", -1), "touch": ("touch --", -1),
    "mkdir": ("mkdir -p --", -1), "write_text": ("tee --", -1), "write_bytes": ("tee --", -1),
    "read_text": ("cat --", -1), "read_bytes": ("cat --", -1), "iterdir": ("ls --", -1),
    "rename": ("mv --", 0), "replace": ("mv --", 0), "symlink_to": ("ln -s --", 0),
    "hardlink_to": ("ln --", 0), "copy": ("cp -r --", 0), "move": ("mv --", 0),
    "chmod": ("chmod", -2), "lchmod": ("chmod", -2),
}
_PATH_PURE = frozenset({
    "exists", "is_file", "is_dir", "is_symlink", "stat", "lstat", "resolve", "absolute",
    "expanduser", "name", "stem", "suffix", "suffixes", "parent", "parents", "parts", "as_posix",
    "glob", "rglob", "match", "relative_to", "with_name", "with_suffix", "with_stem",
    "joinpath", "samefile", "is_absolute", "owner", "group", "anchor", "drive", "root",
    "is_relative_to", "full_match", "walk", "is_mount", "as_uri",
})
# Functions that run a shell command line given as their first argument.
_SHELL_LINE = frozenset({"os.system", "os.popen", "subprocess.getoutput",
                         "subprocess.getstatusoutput", "commands.getoutput", "pty.spawn"})
_SUBPROCESS = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call",
                         "subprocess.check_output", "subprocess.Popen", "asyncio.create_subprocess_shell",
                         "asyncio.create_subprocess_exec"})
_OPEN = frozenset({"builtins.open", "io.open", "codecs.open", "os.open", "gzip.open", "bz2.open",
                   "lzma.open", "tarfile.open", "zipfile.ZipFile", "sqlite3.connect",
                   "shelve.open", "dbm.open", "fileinput.input"})
_HTTP_GET = frozenset({"urllib.request.urlopen", "requests.get", "requests.head", "httpx.get",
                       "httpx.head"})
_CODE = frozenset({"builtins.eval", "builtins.exec", "builtins.compile"})
_ENV_GET = frozenset({"os.getenv", "os.environ.get", "os.getenvb", "os.environb.get",
                      "os.environ.__getitem__", "os.environ.setdefault"})
# Modules whose functions reach files, processes, the network or the interpreter itself:
# a name from them must be one the tables above know, or harmless, or the code is opaque.
_GUARDED = frozenset({
    "os", "posix", "nt", "shutil", "subprocess", "pathlib", "io", "codecs", "tarfile",
    "zipfile", "gzip", "bz2", "lzma", "sqlite3", "shelve", "dbm", "fileinput", "socket",
    "socketserver", "ssl", "http", "urllib", "requests", "httpx", "aiohttp", "urllib3", "ftplib",
    "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "asyncio", "multiprocessing",
    "concurrent", "threading", "pty", "ctypes", "cffi", "pickle", "marshal", "dill", "importlib",
    "runpy", "code", "codeop", "builtins", "sys", "webbrowser", "tempfile", "pdb", "signal",
    "resource", "mmap", "fcntl", "termios", "glob", "configparser", "logging", "gc", "inspect",
    "types", "platform", "sysconfig", "site", "pip", "setuptools", "distutils", "paramiko",
    "fabric", "docker", "boto3", "botocore",
})
_HARMLESS: frozenset[str] = frozenset({
    # os: facts about the process and the system, path arithmetic
    "os.getcwd", "os.getcwdb", "os.getpid", "os.getppid", "os.getuid", "os.geteuid",
    "os.getgid", "os.getegid", "os.getlogin", "os.cpu_count", "os.uname", "os.name", "os.sep",
    "os.linesep", "os.pathsep", "os.devnull", "os.curdir", "os.pardir", "os.extsep",
    "os.altsep", "os.stat", "os.lstat", "os.access", "os.fspath", "os.fsencode", "os.fsdecode",
    "os.get_terminal_size", "os.getloadavg", "os.times", "os.strerror", "os.urandom",
    "os.sysconf", "os.confstr", "os.sched_getaffinity", "os.process_cpu_count",
    "os.get_exec_path", "os.getgroups", "os.umask", "os.isatty", "os.path",
    "shutil.which", "shutil.disk_usage", "shutil.get_terminal_size",
    "shutil.get_archive_formats", "shutil.get_unpack_formats",
    "sys.version", "sys.version_info", "sys.platform", "sys.path", "sys.executable",
    "sys.argv", "sys.prefix", "sys.base_prefix", "sys.exec_prefix", "sys.base_exec_prefix",
    "sys.maxsize", "sys.byteorder", "sys.stdout", "sys.stderr", "sys.stdin", "sys.exit",
    "sys.getsizeof", "sys.getrecursionlimit", "sys.setrecursionlimit", "sys.implementation",
    "sys.flags", "sys.float_info", "sys.int_info", "sys.hash_info", "sys.getdefaultencoding",
    "sys.getfilesystemencoding", "sys.api_version", "sys.hexversion", "sys.maxunicode",
    "sys.builtin_module_names", "sys.stdlib_module_names", "sys.platlibdir",
    "sys.thread_info", "sys.copyright", "sys.abiflags", "sys.float_repr_style",
    "sys.getrefcount", "sys.pycache_prefix", "sys.dont_write_bytecode", "sys.orig_argv",
    "sys.warnoptions", "sys.is_finalizing", "sys.getswitchinterval",
    "subprocess.PIPE", "subprocess.DEVNULL", "subprocess.STDOUT",
    "subprocess.CalledProcessError", "subprocess.TimeoutExpired", "subprocess.CompletedProcess",
    "io.StringIO", "io.BytesIO", "io.TextIOWrapper", "io.DEFAULT_BUFFER_SIZE",
    "socket.gethostname", "ssl.OPENSSL_VERSION", "ssl.OPENSSL_VERSION_INFO",
    "ssl.OPENSSL_VERSION_NUMBER", "ssl.HAS_TLSv1_3", "ssl.HAS_SNI", "ssl.HAS_ALPN",
    "ssl.get_default_verify_paths", "sqlite3.sqlite_version", "sqlite3.sqlite_version_info",
    "sqlite3.version", "importlib.metadata", "importlib.util.find_spec", "importlib.resources",
    "asyncio.run", "asyncio.sleep", "asyncio.gather", "asyncio.get_event_loop",
    "asyncio.new_event_loop", "asyncio.wait_for", "asyncio.Queue", "asyncio.Event",
    "asyncio.Lock", "asyncio.TimeoutError", "asyncio.create_task",
    "threading.Thread", "threading.Lock", "threading.Event", "threading.current_thread",
    "threading.active_count", "multiprocessing.cpu_count", "tempfile.gettempdir",
    "tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.TemporaryDirectory",
    "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile", "tempfile.SpooledTemporaryFile",
    "tempfile.gettempprefix", "glob.glob", "glob.iglob", "glob.escape", "glob.has_magic",
    "configparser.ConfigParser", "configparser.RawConfigParser", "logging.getLogger",
    "logging.basicConfig", "logging.info", "logging.debug", "logging.warning",
    "logging.error", "logging.INFO", "logging.DEBUG", "logging.WARNING", "logging.ERROR",
    "gc.collect", "inspect.signature", "inspect.getsource", "inspect.getfile",
    "inspect.getmembers", "inspect.isclass", "inspect.isfunction", "inspect.getdoc",
    "types.SimpleNamespace", "types.MappingProxyType", "types.ModuleType", "platform",
    "sysconfig.get_paths", "sysconfig.get_path", "sysconfig.get_config_var",
    "sysconfig.get_config_vars", "sysconfig.get_platform", "sysconfig.get_python_version",
    "site.getsitepackages", "site.getusersitepackages", "site.ENABLE_USER_SITE",
    "site.USER_SITE", "site.USER_BASE", "pip.__version__", "setuptools.__version__",
    "signal.SIGTERM", "signal.SIGINT", "signal.SIGKILL", "resource.getrlimit",
    "resource.getrusage", "resource.RLIMIT_NOFILE", "resource.RUSAGE_SELF",
    "builtins.print", "builtins.len", "builtins.str", "builtins.int", "builtins.float",
    "builtins.bool", "builtins.list", "builtins.dict", "builtins.set", "builtins.tuple",
    "builtins.frozenset", "builtins.bytes", "builtins.bytearray", "builtins.range",
    "builtins.enumerate", "builtins.zip", "builtins.map", "builtins.filter", "builtins.sorted",
    "builtins.reversed", "builtins.sum", "builtins.min", "builtins.max", "builtins.abs",
    "builtins.round", "builtins.any", "builtins.all", "builtins.repr", "builtins.hash",
    "builtins.isinstance", "builtins.issubclass", "builtins.type", "builtins.hex",
    "builtins.oct", "builtins.bin", "builtins.ord", "builtins.chr", "builtins.format",
    "builtins.divmod", "builtins.pow", "builtins.iter", "builtins.next", "builtins.input",
    "builtins.help", "builtins.id", "builtins.hasattr", "builtins.callable", "builtins.slice",
    "builtins.object", "builtins.super", "builtins.property", "builtins.staticmethod",
    "builtins.classmethod", "builtins.complex", "builtins.ascii", "builtins.memoryview",
    "builtins.dir", "builtins.None", "builtins.True", "builtins.False", "builtins.Ellipsis",
    "builtins.NotImplemented", "builtins.exit", "builtins.quit", "builtins.aiter",
    "builtins.anext", "builtins.__name__", "builtins.__file__", "builtins.__doc__",
    "builtins.copyright", "builtins.credits", "builtins.license",
})
_BUILTIN_NAMES = frozenset({name.partition(".")[2] for name in _HARMLESS
                            if name.startswith("builtins.")} | {
    "open", "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
    "globals", "locals", "vars", "breakpoint", "__builtins__", "__loader__", "__spec__",
})
# Exceptions and warnings are harmless names too.
_EXCEPTION = re.compile(r"[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Iteration)\Z")
# Dunder attributes that reach the interpreter's internals (a sandbox-escape staple).
_SAFE_DUNDERS = frozenset({"__version__", "__file__", "__name__", "__doc__", "__path__",
                           "__init__", "__len__", "__str__", "__repr__", "__class__",
                           "__module__", "__qualname__", "__author__", "__all__"})
_OS_MODES = re.compile(r"[rbt]*\Z")


class _Python:
    """One pass over a Python module's syntax tree, in source order."""

    __slots__ = ("aliases", "commands", "consts", "depth", "env", "handled", "opaque", "paths")

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth
        self.aliases: dict[str, str] = {}      # local name -> qualified name
        self.consts: dict[str, str | None] = {}  # local name -> constant string (None: varies)
        self.paths: set[str] = set()           # local names holding pathlib.Path objects
        self.commands: list[str] = []
        self.env: list[str] = []
        self.opaque: list[str] = []
        self.handled: set[int] = set()         # ids of nodes already judged

    def run(self, code: str) -> InlineEffects:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return InlineEffects(opaque=("does not parse as Python",))
        try:
            nodes = list(ast.walk(tree))
            if len(nodes) > _MAX_NODES:
                return InlineEffects(opaque=("too long to analyse",))
            self.bind(nodes)
            self.visit(tree)
            for node in nodes:
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and pathlike(node.value) and id(node) not in self.handled:
                    self.commands.append(command("cat --", quote_path(node.value)))
        except RecursionError:
            return InlineEffects(opaque=("nested too deeply to analyse",))
        return InlineEffects(tuple(self.commands), tuple(dict.fromkeys(self.env)),
                             tuple(dict.fromkeys(self.opaque)))

    def note(self, reason: str) -> None:
        self.opaque.append(reason)

    # --------------------------------------------------------------------------- bindings

    def bind(self, nodes: list[ast.AST]) -> None:
        """Imports and simple assignments, wherever they are (one-liners have no scopes)."""
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.partition(".")[0]
                        self.aliases[head] = head
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    continue  # a relative import: the project's own code
                for alias in node.names:
                    if alias.name == "*":
                        if module.partition(".")[0] in _GUARDED:
                            self.note(f"imports everything from {module}")
                        continue
                    self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        for node in nodes:
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = list(node.targets), node.value
            elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
                targets, value = [node.target], node.value
            elif isinstance(node, ast.For | ast.comprehension | ast.With | ast.withitem):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                targets = [target] if target is not None else []
            for target in targets:
                for name in _names(target):
                    self.assign(name, value if isinstance(target, ast.Name) else None,
                                augmented=isinstance(node, ast.AugAssign))

    def assign(self, name: str, value: ast.expr | None, *, augmented: bool) -> None:
        if value is None or augmented:
            self.consts[name] = None
            self.paths.discard(name)
            return
        qualified = self.qualified(value)
        if qualified is not None and name not in self.aliases:
            self.aliases[name] = qualified
            return
        text = self.const(value)
        if name in self.consts and self.consts[name] != text:
            text = None  # bound twice to different values
        self.consts[name] = text
        if self.is_path(value):
            self.paths.add(name)

    # ------------------------------------------------------------------------- resolution

    def qualified(self, node: ast.expr) -> str | None:
        """The dotted name a reference stands for (``os.system``), or None."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in _BUILTIN_NAMES and node.id not in self.consts:
                return f"builtins.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.qualified(node.func)
            if func in ("builtins.__import__", "importlib.import_module") and node.args:
                module = self.const(node.args[0])
                if module is not None:
                    return module.partition(".")[0] if func == "builtins.__import__" else module
            if func == "builtins.getattr" and len(node.args) >= 2:
                base = self.qualified(node.args[0])
                attr = self.const(node.args[1])
                if base is not None and attr is not None:
                    return f"{base}.{attr}"
        return None

    def const(self, node: ast.expr | None) -> str | None:
        """The string value of an expression when it is a constant (paths, commands)."""
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                self.handled.add(id(node))
                return node.value
            if isinstance(node.value, int) and not isinstance(node.value, bool):
                return str(node.value)
            return None
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = [self.const(v.value if isinstance(v, ast.FormattedValue) else v)
                     for v in node.values]
            return None if None in parts else "".join(p for p in parts if p is not None)
        if isinstance(node, ast.BinOp):
            left, right = self.const(node.left), self.const(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Div) and (self.is_path(node.left) or self.is_path(node)):
                return posixpath.join(left, right)
            return None
        if isinstance(node, ast.Call):
            return self.call_value(node)
        if isinstance(node, ast.Attribute) and node.attr in ("parent",):
            base = self.const(node.value)
            return None if base is None else posixpath.dirname(base.rstrip("/")) or "."
        return None

    def call_value(self, node: ast.Call) -> str | None:
        func = self.qualified(node.func)
        args = [self.const(a) for a in node.args]
        if func in ("os.path.join", "posixpath.join") or (
                func is not None and func.endswith(("Path", "Path.joinpath"))
                and func.startswith("pathlib.")):
            if None in args:
                return None
            return posixpath.join(*(a for a in args if a is not None)) if args else "."
        if func in ("os.path.expanduser", "os.path.abspath", "os.path.normpath",
                    "os.path.realpath", "builtins.str", "os.fspath"):
            return args[0] if args else None
        if func in ("os.path.dirname",):
            return posixpath.dirname(args[0]) if args and args[0] is not None else None
        if func in ("pathlib.Path.home", "os.path.expanduser") or (
                func in _ENV_GET and args and args[0] == "HOME"):
            return "~"
        if func in ("pathlib.Path.cwd", "os.getcwd"):
            return "."
        if func in ("tempfile.gettempdir",):
            return "/tmp"
        if func in ("tempfile.mkdtemp",):
            return TEMP_DIR
        if isinstance(node.func, ast.Attribute) and node.func.attr in (
                "expanduser", "resolve", "absolute") and self.is_path(node.func.value):
            return self.const(node.func.value)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath" \
                and self.is_path(node.func.value):
            base = self.const(node.func.value)
            if base is None or None in args:
                return None
            return posixpath.join(base, *(a for a in args if a is not None))
        return None

    def is_path(self, node: ast.expr) -> bool:
        """Whether an expression is a pathlib path (``Path('x')``, ``p / 'y'``, ``p.parent``)."""
        if isinstance(node, ast.Name):
            return node.id in self.paths
        if isinstance(node, ast.Call):
            func = self.qualified(node.func)
            if func is not None and func.startswith("pathlib.") and func.split(".")[-1] in (
                    "Path", "PurePath", "PosixPath", "PurePosixPath", "home", "cwd"):
                return True
            return isinstance(node.func, ast.Attribute) and node.func.attr in (
                "expanduser", "resolve", "absolute", "joinpath", "with_name", "with_suffix") \
                and self.is_path(node.func.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.is_path(node.left)
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            return self.is_path(node.value)
        return False

    # --------------------------------------------------------------------------- visiting

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            func = self.qualified(node.func)
            done = self.call(node, func)
            if func is None:
                self.visit(node.func)  # the object a method is called on
            if not done:
                for child in (*node.args, *node.keywords):
                    self.visit(child)
            return
        if isinstance(node, ast.Attribute | ast.Name):
            if self.reference(node):
                return
        elif isinstance(node, ast.Subscript) and self.subscript(node):
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def reference(self, node: ast.Attribute | ast.Name) -> bool:
        """A name used other than as a call: harmless, or something that reaches the system
        without being called where we can see it (``f = os.system``, ``map(os.remove, x)``)."""
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") \
                and node.attr not in _SAFE_DUNDERS:
            self.note(f"reaches interpreter internals ({node.attr})")
            return True
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
            self.note(f"reaches interpreter internals ({node.id})")
            return True
        if isinstance(node.ctx, ast.Store | ast.Del):
            return False
        name = self.qualified(node)
        if name is None:
            return False
        if name in ("os.environ", "os.environb"):
            self.env.append("*")
            return True
        if name.startswith(("os.environ.", "os.environb.")):
            return False  # os.environ.get(...) is judged as a call
        if self.harmless(name):
            return True
        self.note(f"uses {name} without calling it directly")
        return True

    def harmless(self, name: str) -> bool:
        head = name.partition(".")[0]
        if name.startswith(("os.path.", "importlib.metadata.", "platform.")):
            return True
        if name in _HARMLESS or head not in _GUARDED or name == head:
            return True
        last = name.rpartition(".")[2]
        return bool(_EXCEPTION.match(last)) or last in _SAFE_DUNDERS or (
            name.startswith("pathlib.") and last in ("Path", "PurePath", "PosixPath",
                                                     "PurePosixPath", "home", "cwd"))

    def subscript(self, node: ast.Subscript) -> bool:
        name = self.qualified(node.value)
        if name in ("os.environ", "os.environb"):
            key = self.const(node.slice)
            self.env.append(key if key is not None else "*")
            self.visit(node.slice)
            return True
        if name == "sys.modules":
            self.note("reaches modules through sys.modules")
            return True
        return False

    def call(self, node: ast.Call, func: str | None) -> bool:
        """Judges one call; returns True when its arguments need no further visit."""
        if func is None:
            return self.method_call(node)
        if func in _ENV_GET:
            key = self.const(node.args[0]) if node.args else None
            self.env.append(key if key is not None else "*")
            return False
        if func in ("builtins.__import__", "importlib.import_module"):
            if node.args and self.const(node.args[0]) is None:
                self.note("imports a module named at run time")
            return True
        if func == "builtins.getattr" and len(node.args) >= 2 \
                and self.const(node.args[1]) is None:
            self.note("looks up an attribute named at run time")
            return False
        if func in ("builtins.setattr", "builtins.delattr", "builtins.globals",
                    "builtins.locals", "builtins.vars", "builtins.breakpoint"):
            self.note(f"uses {func.partition('.')[2]}()")
            return False
        if func in _CODE:
            self.code(node, func)
            return False
        if func in _SHELL_LINE or func in _SUBPROCESS:
            self.process(node, func)
            return True
        if func.startswith(("os.exec", "os.spawn", "os.posix_spawn")) or func in (
                "os.fork", "os.forkpty", "os.dup2", "os.kill", "os.killpg", "os.setuid",
                "os.chroot", "pty.fork"):
            self.note(f"calls {func}")
            return False
        if func in _FILE_OPS:
            self.file_op(node, func)
            return False
        if func in ("os.chmod", "os.lchmod", "os.chown", "os.lchown", "shutil.chown",
                    "os.truncate"):
            self.attributes(node, func)
            return False
        if func in _OPEN:
            self.open(node, func)
            return False
        if func in _HTTP_GET:
            url = self.const(node.args[0]) if node.args else None
            if url is None or len(node.args) > 1 or any(
                    k.arg not in ("timeout", "headers") for k in node.keywords):
                self.note(f"{func} with data or an address built at run time")
            else:
                self.commands.append(command("curl -s --", shlex.quote(url)))
            return False
        if self.harmless(func):
            return False
        self.note(f"calls {func}")
        return False

    def method_call(self, node: ast.Call) -> bool:
        """A method of something not imported: pathlib paths are judged, the rest visited."""
        func = node.func
        if not isinstance(func, ast.Attribute) or not self.is_path(func.value):
            return False
        method = func.attr
        if method == "open":
            mode = self.const(node.args[0]) if node.args else self.keyword(node, "mode")
            self.file_access(self.const(func.value), "r" if not node.args and
                             self.keyword_node(node, "mode") is None else mode)
            return False
        spec = _PATH_METHODS.get(method)
        if spec is None:
            if method not in _PATH_PURE:
                self.note(f"calls the path method {method}")
            return False
        template, other = spec
        path = self.const(func.value)
        if other == -2:  # chmod(mode)
            mode = self.const(node.args[0]) if node.args else None
            if path is None or mode is None:
                self.note(f"{method} of a path or mode known only at run time")
            else:
                self.commands.append(command(template, _octal(mode), "--", quote_path(path)))
            return False
        target = self.const(node.args[other]) if other >= 0 and len(node.args) > other else None
        if path is None or (other >= 0 and target is None):
            self.note(f"{method} of a path known only at run time")
            return False
        paths = [path] if target is None else [path, target]
        if method in ("symlink_to", "hardlink_to"):
            paths.reverse()  # link.symlink_to(target) is ``ln -s target link``
        words = [quote_path(p) for p in paths]
        self.commands.append(command(template, *words))
        return False

    def keyword_node(self, node: ast.Call, name: str) -> ast.expr | None:
        return next((k.value for k in node.keywords if k.arg == name), None)

    def keyword(self, node: ast.Call, name: str) -> str | None:
        return self.const(self.keyword_node(node, name))

    def code(self, node: ast.Call, func: str) -> None:
        text = self.const(node.args[0]) if node.args else None
        if text is None:
            self.note(f"{func.partition('.')[2]}() of text built at run time")
            return
        if self.depth >= _MAX_EVAL_DEPTH:
            self.note("eval nested too deeply")
            return
        inner = _Python(self.depth + 1).run(text)
        self.commands.extend(inner.commands)
        self.env.extend(inner.env)
        self.opaque.extend(inner.opaque)

    def process(self, node: ast.Call, func: str) -> None:
        first = node.args[0] if node.args else self.keyword_node(node, "args")
        if first is None and func == "asyncio.create_subprocess_exec":
            first = None
        if func == "asyncio.create_subprocess_exec":
            words = [self.const(a) for a in node.args]
            if node.args and None not in words:
                self.commands.append(shlex.join(w for w in words if w is not None))
            else:
                self.note(f"{func} runs a command built at run time")
            return
        if isinstance(first, ast.List | ast.Tuple):
            words = [self.const(e) for e in first.elts]
            if first.elts and None not in words:
                self.commands.append(shlex.join(w for w in words if w is not None))
                return
        else:
            line = self.const(first)
            if line is not None:
                self.commands.append(line)
                return
        self.note(f"{func} runs a command built at run time")

    def file_op(self, node: ast.Call, func: str) -> None:
        template, count = _FILE_OPS[func]
        names = ("src", "dst") if count == 2 else ("path",)
        values = [self.const(node.args[i]) if len(node.args) > i else self.keyword(node, n)
                  for i, n in enumerate(names)]
        if func in ("os.listdir", "os.scandir", "os.walk") and not node.args and not node.keywords:
            values = ["."]
        if None in values:
            self.note(f"{func} of a path known only at run time")
            return
        self.commands.append(command(template, *(quote_path(v) for v in values if v is not None)))

    def attributes(self, node: ast.Call, func: str) -> None:
        values = [self.const(a) for a in node.args]
        if len(values) < 2 or None in values:
            self.note(f"{func} of a path or value known only at run time")
            return
        path, rest = values[0] or "", [v or "" for v in values[1:]]
        if func == "os.truncate":
            self.commands.append(command("truncate -s", shlex.quote(rest[0]), "--", quote_path(path)))
        elif func.endswith("chmod"):
            self.commands.append(command("chmod", _octal(rest[0]), "--", quote_path(path)))
        else:
            owner = ":".join(shlex.quote(v) for v in rest[:2])
            self.commands.append(command("chown", owner, "--", quote_path(path)))

    def open(self, node: ast.Call, func: str) -> None:
        target = node.args[0] if node.args else (self.keyword_node(node, "file")
                                                 or self.keyword_node(node, "name")
                                                 or self.keyword_node(node, "database")
                                                 or self.keyword_node(node, "files"))
        path = self.const(target)
        if func in ("os.open", "sqlite3.connect", "shelve.open", "dbm.open"):
            mode: str | None = "w"  # flags or a database: read as a write, the safe side
        elif func == "fileinput.input":
            mode = "w" if self.keyword_node(node, "inplace") is not None else "r"
        else:
            raw = node.args[1] if len(node.args) > 1 else self.keyword_node(node, "mode")
            mode = "r" if raw is None else self.const(raw)
        if path is None:
            self.note(f"{func} of a path known only at run time")
            return
        self.file_access(path, mode)

    def file_access(self, path: str | None, mode: str | None) -> None:
        if path is None:
            self.note("opens a file named at run time")
        elif mode is not None and _OS_MODES.match(mode):
            self.commands.append(command("cat --", quote_path(path)))
        elif mode is not None and "a" in mode and not set(mode) & set("wx"):
            self.commands.append(command("tee -a --", quote_path(path)))
        else:
            self.commands.append(command("tee --", quote_path(path)))


def _names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _names(element)
    elif isinstance(target, ast.Starred):
        yield from _names(target.value)


def _octal(mode: str) -> str:
    """``0o755`` (an int constant, read as decimal text) as chmod's octal digits."""
    try:
        return format(int(mode, 0), "o")
    except ValueError:
        return shlex.quote(mode)
