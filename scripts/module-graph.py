#!/usr/bin/env python3
"""The engine's module graph, and the layering rules it must keep.

Prints one line per engine module with the engine modules it uses, then
checks (exit 1 on any failure):
  - no import cycle between the engine's modules (each file a module; a
    folder's mod.rs is the folder), test modules left out;
  - the engine's layers are used downwards only:
      engine::format  < engine::query < engine::read < engine::compute
                                                     < engine::view
    format never uses query, read, compute or view; query never uses read,
    compute or view; read never uses compute or view; compute and view,
    side by side at the top, never use each other. engine::error (at the
    engine's root, below every layer) uses no other engine module;
  - the engine never uses the HTTP layer, config, metrics or the encoders
    (`encode`), and never axum;
  - only the storage layer uses object_store; storage never uses the
    engine, the encoders or the HTTP layer;
  - the encoders (`encode`, once it exists) never use the HTTP layer,
    config, metrics or storage, nor axum;
  - the HTTP layer never uses the engine's codecs (`engine::format::codec`,
    before the layers `engine::codec`) or its decoding threads;
  - every `crate::engine::X` path resolves: X is a module, or a name
    `engine/mod.rs` re-exports (else a re-export the checker cannot follow
    would hide a leak).

Paths are followed through `use` and `pub use` re-exports (so
`crate::engine::Dataset` counts as a use of the module that defines
`Dataset`), `super::super::` chains, `self::`, grouped and nested
`use a::{b::{c, d}, e}` trees, paths relative to a child module, and
inline (non-test) `mod x { ... }` blocks.

    scripts/module-graph.py [--dot]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Engine layers, lowest first; equal ranks are siblings that must not use each other.
LAYER_RANK = {"format": 0, "query": 1, "read": 2, "compute": 3, "view": 3, "write": 3}
# Modules at the engine's root below every layer: they use no other engine module.
BASE = {("engine", "error")}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
USE_RE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);", re.S)
PATH_RE = re.compile(rf"\b(?:crate|super|self)(?:\s*::\s*{IDENT})+")
INLINE_MOD_RE = re.compile(rf"\b(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+({IDENT})\s*\{{")
TEST_MOD_RE = re.compile(rf"#\[cfg\(test\)\]\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+{IDENT}\s*\{{")
TEST_USE_RE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\s*\([^)]*\))?\s+)?use\s+[^;]*;", re.S)
ITEM_RE = re.compile(rf"\b(?:fn|struct|enum|union|type|const|static|trait|mod)\s+({IDENT})|macro_rules!\s*({IDENT})")


def module_of(path: Path) -> tuple:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def strip(text: str) -> str:
    """Drop comments, `#[cfg(test)] mod x { ... }` blocks and `#[cfg(test)] use ...;`.

    Comments become spaces of the same length, so positions keep their meaning.
    """
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)
    out, i = [], 0
    for m in TEST_MOD_RE.finditer(text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out.append(re.sub(r"[^\n]", " ", text[m.start() : j]))
        i = j
    out.append(text[i:])
    text = "".join(out)
    return TEST_USE_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def inline_modules(text: str):
    """(start, end, name) of every inline `mod name { ... }` block."""
    spans = []
    for m in INLINE_MOD_RE.finditer(text):
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        spans.append((m.start(), j, m.group(1)))
    return spans


def context(module: tuple, spans, pos: int) -> tuple:
    """The module a position of a file is in (its file module and the inline modules around it)."""
    inner = [(s, name) for s, e, name in spans if s <= pos < e]
    return module + tuple(name for _, name in sorted(inner))


def split_top(s: str, sep: str = ","):
    depth, cur, out = 0, [], []
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def use_leaves(tree: str):
    """The leaves of a use tree: (segments, alias); `a::{self, b as c}` gives (['a'], None), (['a','b'], 'c')."""
    tree = " ".join(tree.split())
    brace = tree.find("{")
    if brace == -1:
        m = re.fullmatch(rf"\s*(.*?)(?:\s+as\s+({IDENT}|_))?\s*", tree)
        segs = [p.strip() for p in m.group(1).split("::")]
        if segs and segs[0] == "":
            return []  # `::extern_crate::...`
        return [([s for s in segs if s], m.group(2))]
    prefix = [p.strip() for p in tree[:brace].split("::") if p.strip()]
    depth, j = 0, brace
    for j in range(brace, len(tree)):
        depth += {"{": 1, "}": -1}.get(tree[j], 0)
        if depth == 0:
            break
    out = []
    for item in split_top(tree[brace + 1 : j]):
        if not item.strip():
            continue
        for segs, alias in use_leaves(item):
            if segs[:1] == ["self"]:
                segs = segs[1:]
            out.append((prefix + segs, alias))
    return out


class Crate:
    def __init__(self, src: Path):
        self.files = sorted(src.rglob("*.rs"))
        self.modules = {module_of(f): f for f in self.files}
        self.text = {}
        self.spans = {}
        self.imports = {}  # (context module, name) -> (context module, segments)
        self.globs = {}  # context module -> [(context module, segments)]
        self.items = {}  # module -> names of items it defines
        self.uses = {}  # module -> [(context, segments)] of its use leaves
        for f in self.files:
            mod = module_of(f)
            text = strip(f.read_text())
            self.text[mod] = text
            spans = inline_modules(text)
            self.spans[mod] = spans
            self.items[mod] = {a or b for a, b in ITEM_RE.findall(text)}
            leaves = []
            for m in USE_RE.finditer(text):
                ctx = context(mod, spans, m.start())
                for segs, alias in use_leaves(m.group(2)):
                    if not segs:
                        continue
                    leaves.append((ctx, segs))
                    if segs[-1] == "*":
                        self.globs.setdefault(ctx, []).append((ctx, segs[:-1]))
                    elif alias != "_":
                        self.imports[(ctx, alias or segs[-1])] = (ctx, segs)
            self.uses[mod] = leaves

    def absolute(self, ctx: tuple, segs: list, depth: int = 0):
        """The path from the crate root that `segs`, written in module `ctx`, names; None if outside the crate."""
        if not segs or depth > 30:
            return None
        head = segs[0]
        if head == "crate":
            return tuple(segs[1:])
        if head == "self":
            return ctx + tuple(segs[1:])
        if head == "super":
            base, rest = ctx, list(segs)
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            return base + tuple(rest)
        # Relative to the module: a child module, or a name imported here.
        if self.is_module_or_inline(ctx + (head,)):
            return ctx + tuple(segs)
        if (ctx, head) in self.imports:
            ictx, isegs = self.imports[(ctx, head)]
            if isegs != segs:
                target = self.absolute(ictx, isegs, depth + 1)
                if target is not None:
                    return target + tuple(segs[1:])
        return None  # std, an external crate, or a local item

    def is_module_or_inline(self, path: tuple) -> bool:
        if path in self.modules:
            return True
        for n in range(len(path) - 1, 0, -1):
            if path[:n] in self.modules:
                return any(name == path[-1] for _, _, name in self.spans[path[:n]])
        return False

    def canonical(self, path: tuple, depth: int = 0):
        """(the deepest file module `path` leads to, following re-exports; the segments left)."""
        cur, segs, i = (), list(path), 0
        ctx = ()
        while i < len(segs):
            seg = segs[i]
            if cur + (seg,) in self.modules:
                cur = ctx = cur + (seg,)
                i += 1
                continue
            if depth < 30:
                key = (ctx, seg)
                if key in self.imports:
                    ictx, isegs = self.imports[key]
                    target = self.absolute(ictx, isegs)
                    if target is not None and target != ctx + (seg,):
                        return self.canonical(target + tuple(segs[i + 1 :]), depth + 1)
                for gctx, gsegs in self.globs.get(ctx, []):
                    base = self.absolute(gctx, gsegs)
                    if base is None:
                        continue
                    found, rest = self.canonical(base + tuple(segs[i:]), depth + 1)
                    if len(found) > len(self.canonical(base, depth + 1)[0]) or not rest:
                        return found, rest
            break
        return cur, tuple(segs[i:])

    def references(self, mod: tuple):
        """(target file module, segments after it, text) for every crate path the module names."""
        found = []
        for ctx, segs in self.uses[mod]:
            if segs[-1] == "*":
                segs = segs[:-1]
            path = self.absolute(ctx, segs)
            if path is not None:
                found.append((*self.canonical(path), "::".join(segs)))
        text = USE_RE.sub(lambda m: " " * len(m.group(0)), self.text[mod])
        for m in PATH_RE.finditer(text):
            segs = [s.strip() for s in m.group(0).split("::")]
            path = self.absolute(context(mod, self.spans[mod], m.start()), segs)
            if path is not None:
                found.append((*self.canonical(path), "::".join(segs)))
        return found


def main() -> int:
    dot = "--dot" in sys.argv[1:]
    crate = Crate(SRC)
    modules = crate.modules
    deps, external, failures = {}, {}, []
    for mod in modules:
        targets = set()
        for target, rest, written in crate.references(mod):
            if target == ("engine",) and rest and rest[0] not in crate.items.get(("engine",), set()):
                failures.append(f"{'::'.join(mod)} names `{written}`: not a module nor a re-export of engine/mod.rs")
            if target and target != mod:
                targets.add(target)
        deps[mod] = targets
        external[mod] = set(re.findall(r"\b(axum|object_store|tower_http|hyper)::", crate.text[mod]))

    engine = {m for m in modules if m[:1] == ("engine",) and len(m) > 1}
    # Edges between engine modules; a reference to a module's ancestor
    # (a folder's mod.rs, which only declares and re-exports) is not an edge.
    graph = {m: {t for t in deps[m] if t in engine and m[: len(t)] != t} for m in engine}
    name = "::".join
    if dot:
        print("digraph engine {")
        for m in sorted(graph):
            for t in sorted(graph[m]):
                print(f'  "{name(m)}" -> "{name(t)}";')
        print("}")
    else:
        for m in sorted(graph):
            print(f"{name(m)} -> {', '.join(name(t) for t in sorted(graph[m])) or '-'}")

    # Cycles (Tarjan's strongly connected components).
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    for comp in sccs:
        failures.append("import cycle: " + " <-> ".join(name(c) for c in sorted(comp)))

    def engine_layer(m):
        return m[1] if m[:1] == ("engine",) and len(m) > 1 and m[1] in LAYER_RANK else None

    for m in sorted(deps):
        top = m[0] if m else ""
        for t in sorted(deps[m]):
            if top == "engine" and t[0] in ("http", "config", "metrics", "encode"):
                failures.append(f"{name(m)} (engine) uses {name(t)}")
            if top == "storage" and t[0] in ("engine", "http", "encode"):
                failures.append(f"{name(m)} (storage) uses {name(t)}")
            if top == "encode" and t[0] in ("http", "config", "metrics", "storage"):
                failures.append(f"{name(m)} (encode) uses {name(t)}")
            if top == "http" and (
                t[:2] in (("engine", "codec"), ("engine", "decode_pool"))
                or t[:3] in (("engine", "format", "codec"), ("engine", "read", "decode_pool"))
            ):
                failures.append(f"{name(m)} (http) uses {name(t)}")
            if top == "engine" and t[:1] == ("engine",) and m[: len(t)] != t and t[: len(m)] != m:
                lm, lt = engine_layer(m), engine_layer(t)
                if m in BASE and t not in BASE:
                    failures.append(f"{name(m)} (below every layer) uses {name(t)}")
                elif lm and lt and lm != lt:
                    if LAYER_RANK[lt] > LAYER_RANK[lm]:
                        failures.append(f"{name(m)} ({lm}) uses {name(t)} ({lt}): a lower layer uses a higher one")
                    elif LAYER_RANK[lt] == LAYER_RANK[lm]:
                        failures.append(f"{name(m)} ({lm}) uses {name(t)} ({lt}): sibling layers")
        for crate_name in sorted(external[m]):
            if crate_name == "object_store" and top != "storage":
                failures.append(f"{name(m)} uses object_store (only storage may)")
            if crate_name in ("axum", "tower_http", "hyper") and top in ("engine", "storage", "encode"):
                failures.append(f"{name(m)} ({top}) uses {crate_name}")

    out = sys.stderr if dot else sys.stdout
    for f in dict.fromkeys(failures):
        print("FAIL:", f, file=out)
    print(f"{len(engine)} engine modules, {sum(len(v) for v in graph.values())} edges, "
          f"{len(dict.fromkeys(failures))} layering failures", file=out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
