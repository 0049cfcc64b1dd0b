#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What the operator's documentation names exists.

    docs_check.py SOURCE_DIR BUILD_DIR [--replace REL=FILE]...

Reads the operator-facing documents (README.md, docs/*.md, the man pages, the READMEs of
cri/, hooks/containerd/, packaging/*/ and README.Debian) and checks, one line per problem:

  links      every relative link of every Markdown file of the tree names a file that exists,
             and its #anchor a heading of that file (GitHub's slug);
  tree       every source-tree path (docs/..., packaging/..., hooks/...) exists, and the
             documents installed on nodes (man pages, README.Debian) name none;
  package    every path under a directory the packages own (/usr/libexec/pullgate/,
             /usr/share/doc/pullgate/, /usr/share/pullgate/, /etc/pullgate/, /usr/bin/pullgate*,
             ...) is in the .deb's or the .rpm's file list (packaging/debian/*.install, .docs,
             .examples; the spec's %files), and the #anchor of a packaged document is one of
             its headings;
  commands   `pullgatectl [GLOBAL] COMMAND --option` in code (Markdown code spans and blocks,
             the man pages' examples): the command is one `pullgatectl --help` lists and each
             option one its `--help` (or the global options) names; the same for
             pullgate-cri, pullgate-webhook, pullgate-hook and make-certs.sh;
  keys       the README's configuration table and pullgate.json(5) list exactly the keys of
             plugin/base/config.c's table; a JSON block that is a pullgate configuration holds only
             keys of that table; a code span one or two letters away from a key is a typo;
  metrics    every pullgate_* metric is one the daemons define (metrics_consistency.py's
             reading of cri/cri_metrics.c, webhook/whmetrics.c and common/metrics.c), every recording rule name
             (pullgate:..., kep2535:...) one the shipped rules define;
  README     its first 40 lines hold the node's five commands (install, wire, enable
             pullgate-cri, the kubelet's image service, doctor), in that order, and that block
             is docs/install.md's; the package file names carry the project's version.

--replace REL=FILE reads FILE in place of SOURCE_DIR/REL (the test's mutations). Exit 0 when
nothing is wrong, 1 otherwise.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metrics_consistency  # noqa: E402

SRC = ""
REPLACED = {}
PROBLEMS = []
COUNTS = {"links": 0, "tree paths": 0, "package paths": 0, "commands": 0, "options": 0,
          "keys": 0, "metrics": 0}


def problem(where, what):
    PROBLEMS.append(f"{where}: {what}")


def read(rel):
    path = REPLACED.get(rel, os.path.join(SRC, rel))
    with open(path, encoding="utf-8") as f:
        return f.read()


def exists(rel):
    return rel in REPLACED or os.path.exists(os.path.join(SRC, rel))


# ------------------------------------------------------------------ the documents

def tracked_markdown():
    out = subprocess.run(["git", "-C", SRC, "ls-files", "*.md"], capture_output=True, text=True)
    files = [f for f in out.stdout.split("\n") if f]
    if not files:  # not a git tree (a copy): walk it
        for root, dirs, names in os.walk(SRC):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(root, n), SRC) for n in names if n.endswith(".md")]
    return sorted(set(files) | {r for r in REPLACED if r.endswith(".md")})


def operator_docs():
    docs = ["README.md", "cri/README.md", "hooks/containerd/README.md",
            "packaging/containerd/README.md", "packaging/crio/README.md",
            "packaging/kubernetes/annotation-producer.md", "packaging/debian/pullgate.README.Debian"]
    docs += sorted("docs/" + f for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md"))
    docs += sorted("docs/man/" + f for f in os.listdir(os.path.join(SRC, "docs/man")))
    return docs


def troff_text(text):
    """A man page as the reader sees its words: escapes resolved, font macros dropped."""
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\c", "", text)
    text = text.replace("\\-", "-").replace("\\e", "\\").replace("\\(aq", "'")
    text = re.sub(r"\\\(.{2}", "", text)
    lines = []
    for line in text.split("\n"):
        m = re.match(r"^\.(B|I|BR|RB|IR|RI|BI|IB|TP|SS|SH)\b\s*(.*)$", line)
        if m:
            words = re.findall(r'"[^"]*"|\S+', m.group(2))
            line = "".join(w.strip('"') for w in words) if m.group(1) in ("BR", "RB", "IR", "RI", "BI", "IB") \
                else " ".join(w.strip('"') for w in words)
        elif line.startswith("."):
            line = ""
        lines.append(line)
    return "\n".join(lines)


def uncommented(code):
    """Shell code without its comments (# at a line's start or after a blank)."""
    return re.sub(r"(^|\s)#[^\n]*", r"\1", code)


def code_of(rel, text):
    """The code a document shows: Markdown code blocks (without shell comments) and spans; a
    man page's .EX blocks."""
    if rel.startswith("docs/man/"):
        return [uncommented(m.group(1)) for m in re.finditer(r"^\.EX\n(.*?)^\.EE", text, re.S | re.M)]
    blocks = [uncommented(m.group(1)) for m in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", prose)
    return blocks + spans


# ---------------------------------------------------------------------- links

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[`*_]", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(rel):
    text = read(rel)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    out, seen = set(), {}
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', text))
    return out


def check_links():
    for rel in tracked_markdown():
        text = read(rel)
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            COUNTS["links"] += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
            if path and not exists(dest) and not os.path.isdir(os.path.join(SRC, dest)):
                problem(rel, f"links to {target}: no such file in the tree")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problem(rel, f"links to {target}: {dest} has no heading #{anchor}")


# ----------------------------------------------------------------- tree paths

TREE_DIRS = ("docs", "packaging", "hooks", "tools", "cri", "webhook", "plugin", "include", "test",
             "bench", "scripts", "common", "cmake")


# Installed on a node, where no source tree is: they name the installed paths.
INSTALLED_DOCS = ("docs/man/", "packaging/debian/pullgate.README.Debian")


def check_tree_paths(rel, text):
    here = os.path.dirname(rel)
    installed = rel.startswith(INSTALLED_DOCS)
    for m in re.finditer(r"(?<![\w/.$-])((?:%s)/[\w.@+/-]*[\w/])(\*[\w.]*)?" % "|".join(TREE_DIRS), text):
        path = m.group(1).rstrip("/")
        COUNTS["tree paths"] += 1
        if installed:
            problem(rel, f"names {path}, a path of the source tree: this document is read on nodes")
            continue
        candidates = [path, os.path.normpath(os.path.join(here, path))] if here else [path]
        if text[m.end():m.end() + 1] == "<":  # a placeholder: tools/cmd_<name>.c
            if any(os.path.isdir(os.path.join(SRC, os.path.dirname(c))) for c in candidates):
                continue
        if m.group(2):  # a glob: test/test_cri_*.c
            import glob
            if any(glob.glob(os.path.join(SRC, c + m.group(2))) for c in candidates):
                continue
        elif any(exists(c) or os.path.isdir(os.path.join(SRC, c)) for c in candidates):
            continue
        last = path.rsplit("/", 1)[-1]
        if re.fullmatch(r"[A-Z][A-Z_]*(\.\w+)?|\*.*|.*\*", last) and os.path.isdir(
                os.path.join(SRC, os.path.dirname(path))):
            continue  # a placeholder in a directory that exists: test/data/config-keys/RELEASE
        problem(rel, f"names {path}: not in the source tree")


# ------------------------------------------------------------- package paths

# Directories and names the packages own: a path under one of these is the package's to ship.
OWNED = (r"/usr/libexec/pullgate/", r"/usr/libexec/oci/hooks\.d/", r"/usr/share/doc/pullgate/",
         r"/usr/share/pullgate/", r"/etc/pullgate/", r"/usr/bin/pullgate", r"/usr/share/man/man\d/pullgate",
         r"/(usr/)?lib/systemd/system/pullgate", r"/usr/share/containers/oci/hooks\.d/",
         r"/usr/lib/tmpfiles\.d/pullgate", r"/usr/share/dbus-1/interfaces/dev\.pullgate",
         r"/usr/include/pullgate/")
# What the docs name under those directories that no package ships, and who makes it.
NOT_SHIPPED = {
    "/etc/pullgate/annotation.key": "the administrator (or the DaemonSet): the webhook's key",
    "/etc/pullgate/annotation.key.previous": "the administrator, during a key rotation",
    "/etc/pullgate/config.json.before-rollback-to-OLD-VERSION": "config-rollback's backup",
    "/etc/pullgate/config.json.before-rollback-to-VERSION": "config-rollback's backup",
}
RPM_MACROS = {"%{_bindir}": "/usr/bin", "%{_libexecdir}": "/usr/libexec", "%{_datadir}": "/usr/share",
              "%{_sysconfdir}": "/etc", "%{_unitdir}": "/usr/lib/systemd/system",
              "%{_tmpfilesdir}": "/usr/lib/tmpfiles.d", "%{_mandir}": "/usr/share/man",
              "%{_includedir}": "/usr/include", "%{_libdir}": "/usr/lib64", "%{version}": "VERSION",
              "%{name}": "pullgate"}


def tree_files(rel):
    """rel and, for a directory, every file below it (relative to it, with its own name)."""
    full = os.path.join(SRC, rel)
    if not os.path.isdir(full):
        return [os.path.basename(rel)]
    base = os.path.basename(rel.rstrip("/"))
    out = [base]
    for root, _, names in os.walk(full):
        for n in names:
            out.append(os.path.join(base, os.path.relpath(os.path.join(root, n), full)))
    return out


def deb_files():
    files = set()
    d = "packaging/debian/"
    for line in read(d + "pullgate.install").split("\n") + read(d + "libpullgate-dev.install").split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for prefix in (("/", "/usr/") if line.startswith("*lib/") else ("/",)):
            files.add(prefix + line.lstrip("*").rstrip("/"))
    for line in read(d + "pullgate.docs").split():
        files |= {"/usr/share/doc/pullgate/" + f for f in tree_files(line)}
    for line in read(d + "pullgate.examples").split():
        files |= {"/usr/share/doc/pullgate/examples/" + f for f in tree_files(line)}
    files.add("/usr/share/doc/pullgate/README.Debian")
    return files


def rpm_files():
    files = set()
    spec = read("packaging/rpm/pullgate.spec")
    # rpm's default documentation directory is NAME-VERSION; the spec may name it NAME.
    docdir = "pullgate" if re.search(r"^%global\s+_docdir_fmt\s+%\{name\}", spec, re.M) else "pullgate-VERSION"
    body = re.split(r"^%changelog", spec, flags=re.M)[0]
    in_files = False
    for line in body.split("\n"):
        if line.startswith("%files"):
            in_files = True
            continue
        if re.match(r"^%(package|description|prep|build|install|post|pre|if|else|endif)", line):
            in_files = False
        if not in_files or not line.strip() or line.startswith("#"):
            continue
        words = re.sub(r"%(dir|config\([^)]*\)|attr\([^)]*\)|ghost)\s+", "", line).split()
        if words[0] in ("%doc", "%license"):
            dest = f"/usr/share/{'doc' if words[0] == '%doc' else 'licenses'}/{docdir}/"
            for w in words[1:]:
                if w == "examples":  # made in %install from these
                    for src in ("hooks/containerd", "packaging/crio/crio.conf.d"):
                        files |= {dest + "examples/" + f for f in tree_files(src)}
                else:
                    files |= {dest + f for f in tree_files(w)}
            continue
        path = words[0]
        for k, v in RPM_MACROS.items():
            path = path.replace(k, v)
        files.add(path.rstrip("*"))
    return files


def package_dirs(files):
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(2, len(parts)):
            dirs.add("/".join(parts[:i]))
    return dirs


def check_package_paths(rel, text, shipped, dirs, both):
    for m in re.finditer(r"(?<![\w.$/-])(/(?:usr|etc|lib)/[\w.@+/-]*[\w/])(#[\w-]+)?", text):
        path, anchor = m.group(1).rstrip("/"), (m.group(2) or "")[1:]
        if not any(re.match(o, path + "/") or re.match(o, path) for o in OWNED):
            continue
        COUNTS["package paths"] += 1
        if path.startswith("/usr/share/doc/pullgate/") and path != "/usr/share/doc/pullgate/README.Debian" \
                and path not in both:
            # doctor's see: and the man pages cite one path for both packages
            problem(rel, f"names {path}: not in both packages (.deb and .rpm)")
            continue
        if path in shipped or path in dirs or path in NOT_SHIPPED:
            pass
        elif re.search(r"/man/man\d/[\w.-]+\.\d$", path) and path + ".gz" not in shipped and path in {
                f for f in shipped if f.endswith(path[-2:])}:
            pass
        elif re.search(r"[A-Z]{3,}", path):
            continue  # a placeholder (FILE, VERSION, NAME)
        else:
            problem(rel, f"names {path}: no package ships it")
            continue
        if anchor and path.startswith("/usr/share/doc/pullgate/") and path.endswith(".md"):
            src_rel = doc_source(path)
            if src_rel and anchor not in anchors(src_rel) and not re.search(r"NAME|CHECK", anchor):
                problem(rel, f"names {path}#{anchor}: {src_rel} has no such heading")


def doc_source(installed):
    """The tree's file a packaged document is installed from."""
    name = installed[len("/usr/share/doc/pullgate/"):]
    for line in read("packaging/debian/pullgate.docs").split():
        if os.path.basename(line) == name:
            return line
    if name.startswith("examples/containerd/"):
        return "hooks/containerd/" + name[len("examples/containerd/"):]
    return None


# -------------------------------------------------------------------- commands

GLOBAL_WITH_VALUE = {"--config", "--state-dir", "--policy", "--allowlist", "--read-only-dir",
                     "--pinned", "--credential-ttl", "--dbus"}


def run_help(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return r.stdout + r.stderr


def options_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)) | {"--help", "--version"}


class Helps:
    def __init__(self, build):
        ctl = os.environ.get("PULLGATECTL") or os.path.join(build, "tools/pullgatectl")
        self.ctl = ctl
        top = run_help([ctl, "--help"])
        self.commands = set(re.findall(r"^  ([a-z][a-z-]+) ", top.split("Global options")[0], re.M))
        self.global_options = options_in(top.split("Global options")[1]) if "Global options" in top else set()
        self.command_options = {}
        self.tools = {
            "pullgate-cri": os.path.join(build, "cri/pullgate-cri"),
            "pullgate-webhook": os.path.join(build, "webhook/pullgate-webhook"),
            "pullgate-hook": os.environ.get("PULLGATE_HOOK") or os.path.join(build, "hooks/pullgate-hook"),
            "make-certs.sh": os.path.join(SRC, "packaging/kubernetes/make-certs.sh"),
            "pullgate-config-rollback": os.path.join(build, "tools/pullgate-config-rollback"),
        }
        self.tool_help = {}
        if len(self.commands) < 10:
            problem("pullgatectl --help", f"lists {len(self.commands)} commands: the parser is out of date")

    def command(self, name):
        if name not in self.command_options:
            self.command_options[name] = options_in(run_help([self.ctl, name, "--help"]))
        return self.command_options[name]

    def tool(self, name):
        if name not in self.tool_help:
            path = self.tools[name]
            text = run_help([path, "--help"]) if os.access(path, os.X_OK) else None
            if text is not None and name == "make-certs.sh":
                self.tool_help[name] = (options_in(text), set(re.findall(r"^#?\s{2,3}([a-z][a-z-]+)\s", read(
                    "packaging/kubernetes/make-certs.sh"), re.M)))
            else:
                self.tool_help[name] = (options_in(text) if text is not None else None, set())
        return self.tool_help[name]


def words_after(code, name):
    """For each `name` in code: the words that follow it, up to the end of its command."""
    for m in re.finditer(r"(?:(?<=[\s(`'\"/|;&])|^)%s(?=\s|$)" % re.escape(name), code, re.M):
        rest = code[m.end():]
        rest = re.split(r"\n(?!\s)|&&|\|\||[|;#)`]|\$\(", rest.replace("\\\n", " "), maxsplit=1)[0]
        yield rest.split()


def check_commands(rel, code, helps):
    for words in words_after(code, "pullgatectl"):
        i = 0
        while i < len(words) and words[i].startswith("-"):
            opt = words[i].split("=")[0]
            if opt not in helps.global_options:
                problem(rel, f"pullgatectl {words[i]}: not a global option of `pullgatectl --help`")
            i += 2 if opt in GLOBAL_WITH_VALUE and "=" not in words[i] else 1
        if i >= len(words):
            continue
        cmd = words[i]
        if not re.fullmatch(r"[a-z][a-z-]*", cmd):
            continue  # a placeholder (COMMAND, [...]) or prose
        COUNTS["commands"] += 1
        if cmd not in helps.commands:
            problem(rel, f"pullgatectl {cmd}: not a command of `pullgatectl --help`")
            continue
        known = helps.command(cmd) | helps.global_options
        for w in words[i + 1:]:
            opt = w.split("=")[0].strip("[]|,.")
            COUNTS["options"] += bool(re.fullmatch(r"--[a-z][a-z0-9-]*", opt))
            if re.fullmatch(r"--[a-z][a-z0-9-]*", opt) and opt not in known:
                problem(rel, f"pullgatectl {cmd} {opt}: not an option `pullgatectl {cmd} --help` names")
    for tool in helps.tools:
        for words in words_after(code, tool):
            options, subcommands = helps.tool(tool)
            if options is None:
                continue  # not built here
            COUNTS["commands"] += 1
            for w in words:
                opt = w.split("=")[0].strip("[]|,.")
                COUNTS["options"] += bool(re.fullmatch(r"--[a-z][a-z0-9-]*", opt))
                if re.fullmatch(r"--[a-z][a-z0-9-]*", opt) and opt not in options:
                    problem(rel, f"{tool} {opt}: not an option its --help names")
            if tool == "make-certs.sh" and subcommands:
                plain = [w for w in words if not w.startswith("-")]
                # make-certs.sh [--dir DIR] ... COMMAND: the first word no option takes
                k = 0
                while k < len(words) and words[k].startswith("-"):
                    k += 2 if words[k] in ("--dir", "--namespace", "--service", "--days") else 1
                if k < len(words) and plain and re.fullmatch(r"[a-z][a-z-]*", words[k]) and \
                        words[k] not in subcommands:
                    problem(rel, f"make-certs.sh {words[k]}: not a command it documents")


# ------------------------------------------------------------------------ keys

def config_keys():
    text = read("plugin/base/config.c")
    table = re.search(r"keys\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    keys = re.findall(r'\{"(\w+)",\s*KEY_', table.group(1) if table else "")
    if len(keys) < 15:
        problem("plugin/base/config.c", f"read {len(keys)} keys from the key table: the parser is out of date")
    return set(keys)


def near(a, b):
    """Levenshtein distance of at most 2."""
    if abs(len(a) - len(b)) > 2:
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] <= 2


def check_keys(rel, text, code, keys):
    for block in re.findall(r"^```json\n(.*?)^```", text, re.S | re.M):
        try:
            obj = json.loads(block)
        except ValueError:
            continue
        if isinstance(obj, dict) and len(set(obj) & keys) >= 2:
            for k in sorted(set(obj) - keys):
                problem(rel, f"a configuration block holds \"{k}\", not a key of plugin/base/config.c")
    for span in code:
        for word in set(re.findall(r"(?<![\w.-])([a-z]+[A-Z]\w*)(?![\w-])", span)):
            COUNTS["keys"] += word in keys
            if word not in keys and any(near(word, k) for k in keys):
                problem(rel, f"`{word}`: not a configuration key (one of {sorted(k for k in keys if near(word, k))}?)")


def check_key_tables(keys):
    readme = read("README.md")
    table = re.findall(r"^\| `(\w+)` \|", readme.split("## Configuration", 1)[-1], re.M)
    for k in sorted(set(table) - keys):
        problem("README.md", f"the configuration table lists `{k}`, not a key of plugin/base/config.c")
    for k in sorted(keys - set(table)):
        problem("README.md", f"the configuration table lacks `{k}`")
    man = troff_text(read("docs/man/pullgate.json.5"))
    for k in sorted(keys):
        if not re.search(r"^%s\b" % k, man, re.M):
            problem("docs/man/pullgate.json.5", f"does not describe the key {k}")


# --------------------------------------------------------------------- metrics

def metric_names():
    defs = {}
    for f in ("cri/cri_metrics.c", "webhook/whmetrics.c"):
        defs.update(metrics_consistency.definitions(REPLACED.get(f, os.path.join(SRC, f))))
    defs.update(metrics_consistency.build_info(SRC))  # defined once, in common/metrics.c
    names = set(defs)
    names |= {n + s for n, d in defs.items() if d["type"] == "histogram" for s in ("_bucket", "_sum", "_count")}
    rules = read("packaging/kubernetes/prometheus-rules.yaml")
    records = set(re.findall(r"record:\s*(\S+)", rules))
    if len(defs) < 20:
        problem("cri/cri_metrics.c", f"read {len(defs)} metrics: the parser is out of date")
    return names, records


# A metric: one of the daemons' families, or anything with a Prometheus unit or type suffix
# (a misspelt family too); not a CMake target such as pullgate_internal.
METRIC = (r"(?<![\w:/.-])(pullgate_(?:(?:cri|webhook|build)_[a-z0-9_]*[a-z0-9]|[a-z][a-z0-9_]*"
          r"_(?:total|seconds|bucket|count|sum|info|up|pulledrecords|pullintents|last_hour)))(?![\w(])")
# A recording rule: kep2535:... (the kubelet's metrics renamed) or pullgate:X:Y (a rule's
# level:metric:operation form; pullgate:unverified-<hash> and the like are record names).
RULE = r"(?<![\w:])(kep2535:[a-z0-9_:]*[a-z0-9]|pullgate:[a-z0-9_]+:[a-z0-9_:]*[a-z0-9])"


def check_metrics(rel, text, names, records):
    for m in sorted(set(re.findall(METRIC, text))):
        COUNTS["metrics"] += 1
        if m not in names:
            problem(rel, f"names the metric {m}, which no daemon defines")
    for r in sorted(set(re.findall(RULE, text))):
        if r not in records:
            problem(rel, f"names the recording rule {r}, which the shipped rules do not define")


# ---------------------------------------------------------------------- README

NODE_PATH = [
    ("install the package", r"(apt-get|dnf) install .*pullgate[_-]"),
    ("pullgatectl wire", r"pullgatectl wire\b"),
    ("enable pullgate-cri", r"systemctl enable --now pullgate-cri"),
    ("the kubelet's image service", r"imageServiceEndpoint: unix:///run/pullgate/cri\.sock.*systemctl restart kubelet"),
    ("pullgatectl doctor", r"pullgatectl doctor\b"),
]


def block(text, name):
    m = re.search(r"^<!-- lifecycle-test: %s -->\n```[^\n]*\n(.*?)^```" % re.escape(name), text, re.S | re.M)
    return m.group(1) if m else None


def check_debian_readme():
    """README.Debian's list of the documentation names every document the package ships."""
    text = read("packaging/debian/pullgate.README.Debian")
    text = text.split("\nDocumentation\n", 1)[-1].split("\n\n\n", 1)[0]
    text = re.split(r"\n[A-Z][^\n]*\n-{3,}\n", text, maxsplit=1)[0]  # up to the next section
    for line in read("packaging/debian/pullgate.docs").split():
        name = os.path.basename(line)
        if name not in text:
            problem("packaging/debian/pullgate.README.Debian", f"its documentation list omits {name}")


def check_readme(version):
    readme = read("README.md")
    first = readme.split("\n")[:40]
    line_of = {}
    for what, pattern in NODE_PATH:
        hits = [i for i, l in enumerate(first) if re.search(pattern, l) and not l.lstrip().startswith("#")]
        if not hits:
            problem("README.md", f"its first 40 lines do not hold the node path's step: {what}")
        else:
            line_of[what] = hits[0]
    order = [line_of[w] for w, _ in NODE_PATH if w in line_of]
    if order != sorted(order):
        problem("README.md", "the node path's steps are not in order: install, wire, enable, kubelet, doctor")
    guide_text = read("docs/install.md") if exists("docs/install.md") else ""
    if not guide_text:
        problem("docs/install.md", "missing: the one installation guide")
    mine, guide = block(readme, "install"), block(guide_text, "install")
    if mine is None or guide is None:
        problem("README.md", "README.md and docs/install.md must both mark the installation <!-- lifecycle-test: install -->")
    elif mine != guide:
        problem("README.md", "its installation block is not docs/install.md's")
    for rel in ("README.md", "docs/install.md", "docs/lifecycle.md"):
        if not exists(rel):
            continue
        for v in set(re.findall(r"pullgate[_-](\d+\.\d+\.\d+)-1[._]", read(rel))):
            if v != version and not re.search(r"allow-downgrades[^\n]*pullgate_%s" % re.escape(v), read(rel)):
                problem(rel, f"names the package of release {v}; this release is {version}")


# ------------------------------------------------------------------------ main

def project_version():
    m = re.search(r"project\(\s*pullgate\s+VERSION\s+([\d.]+)", read("CMakeLists.txt"), re.I)
    return m.group(1) if m else "?"


def main(argv):
    global SRC
    if len(argv) < 3:
        print(__doc__)
        return 2
    SRC, build = argv[1], argv[2]
    rest = argv[3:]
    while rest:
        if rest[0] != "--replace" or len(rest) < 2 or "=" not in rest[1]:
            print(__doc__)
            return 2
        rel, path = rest[1].split("=", 1)
        REPLACED[rel] = path
        rest = rest[2:]
    helps = Helps(build)
    keys = config_keys()
    names, records = metric_names()
    deb, rpm = deb_files(), rpm_files()
    shipped = deb | rpm
    dirs = package_dirs(shipped)
    both = (deb | package_dirs(deb)) & (rpm | package_dirs(rpm))
    check_links()
    checked = 0
    for rel in operator_docs():
        raw = read(rel)
        text = troff_text(raw) if rel.startswith("docs/man/") else raw
        code = code_of(rel, raw)
        check_tree_paths(rel, text)
        check_package_paths(rel, text, shipped, dirs, both)
        for c in code:
            check_commands(rel, troff_text(c) if rel.startswith("docs/man/") else c, helps)
        check_keys(rel, raw, code, keys)
        check_metrics(rel, text, names, records)
        checked += 1
    check_key_tables(keys)
    check_debian_readme()
    check_readme(project_version())
    for p in PROBLEMS:
        print(p)
    print(f"{checked} documents and {len(tracked_markdown())} Markdown files; checked: "
          + ", ".join(f"{n} {k}" for k, n in COUNTS.items())
          + f" (against {len(keys)} keys, {len(names)} metric names, {len(shipped)} packaged paths, "
          f"{len(helps.commands)} pullgatectl commands): {len(PROBLEMS)} problem(s)", file=sys.stderr)
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
